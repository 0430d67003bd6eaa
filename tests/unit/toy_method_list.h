/* Force-included into the test_hooks build of the core (-include): appends
 * the toy query-aware method to the registry's single list. */
#define KVC_EXTRA_METHODS(X)                                                                                           \
    X(toy, TOY, 63, "toy", "", "test only: evicts the entry with the least observed attention mass")
