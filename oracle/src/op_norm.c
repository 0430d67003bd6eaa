/* ||V||_op through LAPACKE: the largest eigenvalue of a symmetric matrix. */
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kvc_oracle/kvc_oracle.h"

double kvc_sym_max_eig(const double *G, size_t dv)
{
    double *a = malloc(dv * dv * sizeof(double));
    double *w = malloc(dv * sizeof(double));
    double *z = malloc(dv * sizeof(double));
    lapack_int *isuppz = malloc(2 * dv * sizeof(lapack_int));
    double result = -1.0;
    if (a && w && z && isuppz) {
        memcpy(a, G, dv * dv * sizeof(double));
        lapack_int found = 0;
        lapack_int info = LAPACKE_dsyevr(LAPACK_ROW_MAJOR, 'N', 'I', 'U', (lapack_int)dv, a, (lapack_int)dv, 0.0, 0.0,
                                         (lapack_int)dv, (lapack_int)dv, 0.0, &found, w, z, 1, isuppz);
        if (info == 0 && found == 1) result = w[0];
    }
    free(a);
    free(w);
    free(z);
    free(isuppz);
    return result;
}
