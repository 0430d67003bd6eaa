/* The one list of methods. Every registry, name table and iteration in the
 * library is generated from it (X-macro): a new method is one line here plus
 * its own file defining `kvc_method_ops_<ident>`.
 *   X(ident, enum value) */
#ifndef KVC_METHOD_LIST_H
#define KVC_METHOD_LIST_H

#define KVC_METHOD_LIST(X)                                  \
    X(exact, KVC_METHOD_EXACT)                              \
    X(sink_window, KVC_METHOD_SINK_WINDOW)                  \
    X(uniform, KVC_METHOD_UNIFORM)                          \
    X(subgen, KVC_METHOD_SUBGEN)                            \
    X(balancekv, KVC_METHOD_BALANCEKV)                      \
    X(balancekv_prefill, KVC_METHOD_BALANCEKV_PREFILL)      \
    X(express, KVC_METHOD_EXPRESS)                          \
    X(express_prefill, KVC_METHOD_EXPRESS_PREFILL)

#endif
