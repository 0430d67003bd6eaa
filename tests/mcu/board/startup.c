/* Reset and fault handlers for the MPS2 boards under QEMU: copy .data, zero
 * .bss, turn the FPU on where there is one, open newlib's semihosting
 * streams, run main and report its status through semihosting exit. A fault
 * prints its name and exits with status 3, so a crash ends the test instead
 * of hanging QEMU. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern uint32_t __etext, __data_start__, __data_end__, __bss_start__, __bss_end__, __stack_top;
extern int main(void);
extern void initialise_monitor_handles(void);

void kvc_reset_handler(void);
void _init(void);
void _fini(void);

/* newlib's init/fini arrays call these (crti.o is not linked: -nostartfiles) */
void _init(void) {}
void _fini(void) {}
void kvc_fault_handler(void);

__attribute__((noreturn)) void kvc_reset_handler(void)
{
    const uint32_t *src = &__etext;
    for (uint32_t *dst = &__data_start__; dst < &__data_end__;) *dst++ = *src++;
    for (uint32_t *dst = &__bss_start__; dst < &__bss_end__;) *dst++ = 0;
#if defined(__ARM_FP)
    /* CPACR: full access to CP10 and CP11 (the FPU) before any float instruction */
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
    initialise_monitor_handles();
    exit(main());
}

__attribute__((noreturn)) void kvc_fault_handler(void)
{
    uint32_t ipsr;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    printf("FAULT: exception %lu (3 hard fault, 4 memory, 5 bus, 6 usage)\n", (unsigned long)(ipsr & 0x1FFu));
    exit(3);
}

/* initial stack pointer, then the handlers of exceptions 1..15 */
__attribute__((section(".vectors"), used)) static const void *const g_vectors[16] = {
    &__stack_top,      (const void *)kvc_reset_handler, (const void *)kvc_fault_handler,
    (const void *)kvc_fault_handler, (const void *)kvc_fault_handler, (const void *)kvc_fault_handler,
    (const void *)kvc_fault_handler, 0, 0, 0, 0,
    (const void *)kvc_fault_handler, (const void *)kvc_fault_handler, 0,
    (const void *)kvc_fault_handler, (const void *)kvc_fault_handler};
