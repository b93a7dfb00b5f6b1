/* cmath.h: calf's own exp, log, sin, cos, tanh and integer power, in double. libm's pick
 * an FMA or a non-FMA variant by CPU at run time and differ in the last bit; these are one
 * fixed sequence of IEEE double +, -, *, / (no fused operation, whatever the target), so
 * every build on every CPU gets the same bits. */
#ifndef CALF_CMATH_H
#define CALF_CMATH_H

#include <stdint.h>

/* Accuracy against the true value, measured by tests/test_cmath.c (dense sweeps and
 * random points, against glibc's libm, itself within 1 ulp):
 *   cm_exp, cm_log, cm_sin, cm_cos, cm_expm1: < 1 ulp (faithful), everywhere;
 *   cm_tanh: < 2.5 ulp; cm_powi: < 1 ulp while |x^n| lies within [2^-900, 2^990]
 *   (beyond, plain double powering takes over for the products left: the right inf or 0,
 *   and a relative error that grows with n, about n 2^-53, in between).
 * Special values follow C99 Annex F: NaN in, NaN out; exp(-inf) = 0, exp(inf) = inf;
 * log(0) = -inf, log(x < 0) = NaN, log(inf) = inf; sin/cos(+-inf) = NaN; sin, tanh and
 * expm1 keep the sign of zero; cm_powi(x, 0) = 1 for every x, NaN included. Arguments of
 * sin and cos are reduced exactly (Cody-Waite below 2^20 pi/2, Payne-Hanek with 1,200
 * bits of 2/pi above), so any finite double works. */
double cm_exp(double x);
double cm_expm1(double x);
double cm_log(double x);
double cm_sin(double x);
double cm_cos(double x);
double cm_tanh(double x);
double cm_powi(double x, int64_t n);

/* The text of src/base/cmath_tanh.inc (NUL-terminated; embedded at build time), which
 * defines cm_tanh's code as calf_tanhd: `calf export` writes it into a policy whose greedy
 * action calls tanh in double, the same operations in the same order. */
extern const char cm_src_cmath_tanh[];

#endif
