/* Reset and fault handlers for the MPS2 boards under QEMU: copy .data, zero
 * .bss, turn the FPU on where there is one, open newlib's semihosting
 * streams, run main with the semihosting command line (QEMU's "-kernel FILE
 * -append ARGS" gives argv = FILE ARGS...) and report its status through
 * semihosting exit. A fault
 * prints its name and exits with status 3, so a crash ends the test instead
 * of hanging QEMU. */
#include <stdint.h>
#include <stdlib.h>

extern uint32_t __etext, __data_start__, __data_end__, __bss_start__, __bss_end__, __stack_top;
extern int main(int argc, char **argv);
extern void initialise_monitor_handles(void);

void kvc_reset_handler(void);
void _init(void);
void _fini(void);

/* newlib's init/fini arrays call these (crti.o is not linked: -nostartfiles) */
void _init(void) {}
void _fini(void) {}
void kvc_fault_handler(void);

/* SYS_GET_CMDLINE (0x15): the command line into buf; 0 on success. */
static int semihost_cmdline(char *buf, int len)
{
    volatile int block[2] = {(int)(uintptr_t)buf, len};
    register int r0 __asm__("r0") = 0x15;
    register volatile int *r1 __asm__("r1") = block;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

enum { MAX_ARGS = 8 };
static char g_cmdline[256];
static char *g_argv[MAX_ARGS + 1];

static int split_args(void)
{
    int argc = 0;
    if (semihost_cmdline(g_cmdline, (int)sizeof g_cmdline - 1) != 0) return 0;
    for (char *p = g_cmdline; *p != 0 && argc < MAX_ARGS;) {
        while (*p == ' ') *p++ = 0;
        if (*p == 0) break;
        g_argv[argc++] = p;
        while (*p != 0 && *p != ' ') p++;
    }
    g_argv[argc] = 0;
    return argc;
}

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
    const int argc = split_args();
    exit(main(argc, g_argv));
}

/* SYS_WRITE0 (0x04): a NUL-terminated string to the debug console (no stdio,
 * so that a firmware without printf stays without it). */
static void semihost_write0(const char *s)
{
    register int r0 __asm__("r0") = 0x04;
    register const char *r1 __asm__("r1") = s;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
}

__attribute__((noreturn)) void kvc_fault_handler(void)
{
    uint32_t ipsr;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    static const char *const names[7] = {"?", "?", "NMI", "hard fault", "memory fault", "bus fault", "usage fault"};
    semihost_write0("FAULT: ");
    semihost_write0((ipsr & 0x1FFu) < 7u ? names[ipsr & 0x1FFu] : "exception");
    semihost_write0("\n");
    exit(3);
}

/* initial stack pointer, then the handlers of exceptions 1..15 */
__attribute__((section(".vectors"), used)) static const void *const g_vectors[16] = {&__stack_top,
                                                                                     (const void *)kvc_reset_handler,
                                                                                     (const void *)kvc_fault_handler,
                                                                                     (const void *)kvc_fault_handler,
                                                                                     (const void *)kvc_fault_handler,
                                                                                     (const void *)kvc_fault_handler,
                                                                                     (const void *)kvc_fault_handler,
                                                                                     0,
                                                                                     0,
                                                                                     0,
                                                                                     0,
                                                                                     (const void *)kvc_fault_handler,
                                                                                     (const void *)kvc_fault_handler,
                                                                                     0,
                                                                                     (const void *)kvc_fault_handler,
                                                                                     (const void *)kvc_fault_handler};
