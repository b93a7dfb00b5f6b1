/* rmsprop.h: RMSProp (Tieleman & Hinton 2012) as PyTorch's torch.optim.RMSprop defines it,
 * the centered form included (the MinAtar paper's DQN: lr 2.5e-4, alpha 0.95, centered,
 * eps 0.01), over flat float arrays with its arithmetic order written down like adam.h's. */
#ifndef CALF_RMSPROP_H
#define CALF_RMSPROP_H

#include <stdbool.h>
#include <stddef.h>

/* One step over n flat floats, element by element in this order, fma(a, b, c) being
 * a * b + c rounded once (C's fmaf) and every other operation rounded to float:
 *   v = fma(one_minus_alpha * g, g, v * alpha)           (square_avg.mul_(alpha).addcmul_)
 *   centered: m = fma(one_minus_alpha, g, m * alpha)     (grad_avg.mul_(alpha).add_)
 *             d = fma(-m, m, v)                          (square_avg.addcmul(.., value=-1))
 *   else:     d = v
 *   avg = sqrt(d) + eps                                  (sqrt_, then add_(eps): eps
 *                                                         outside the root)
 *   p = p + (neg_lr * g) / avg                           (param.addcdiv_(value=-lr))
 * That is PyTorch 1.13's _single_tensor_rmsprop (momentum 0, weight_decay 0) as Debian's
 * build runs it on an x86-64 CPU with AVX2 and FMA, whose kernels fuse those three
 * multiply-adds: tests/test_rmsprop.c holds its bits. one_minus_alpha is 1 - alpha rounded
 * once from double (PyTorch hands the Python float 1 - alpha to a float kernel: 0.05f for
 * alpha 0.95, where 1.0f - 0.95f is 0.05000001f), and neg_lr is -lr. m is only read and
 * written when centered. fma is exact, so the bits are the same with and without the
 * instruction (kernels.h: generic calls libm's fmaf, fma uses the instruction).
 * Two departures, each where PyTorch's own bits are of no use: a new v or m under FLT_MIN
 * in magnitude is stored, and used, as +0 (as adam.h does, for the same reason: a dead
 * unit's averages decaying into subnormals, which some CPUs multiply in microcode; with
 * eps >= 1e-18 such a v never changed a parameter), and a d below 0 (v - m^2 in rounding,
 * mathematically >= 0) is taken as 0 where PyTorch's root would be NaN (a NaN v stays NaN).
 * The loop is element-wise, so ranks stepping slices of one array get one process's bits. */
void rmsprop_step(float *params,     /* (n) */
                  const float *grad, /* (n) */
                  float *m,          /* (n) grad_avg (centered only; else unused) */
                  float *v,          /* (n) square_avg */
                  size_t n, float neg_lr, float alpha, float one_minus_alpha, float eps,
                  bool centered);

#endif
