// Rounding-error bounds that the tests and the audit derive their float
// tolerances from, instead of constants that happened to pass on one machine.
//
// The model is the standard one (Higham, "Accuracy and Stability of Numerical
// Algorithms", 2nd ed., ch. 2-3): every basic operation returns the exact
// result times (1 + d) with |d| <= u, the storage type's unit roundoff. A sum
// or dot product of n terms, evaluated in any order (a BLAS's blocking, a
// vectorised reduction, another processor's kernel), then satisfies
//     |computed - exact| <= gamma(n) * sum_i |term_i|,  gamma(n) = n u / (1 - n u).
// The bound holds for every order and every processor, which is what a
// tolerance must do: a test that passes with it passes on any x86-64 machine.
#ifndef SPECLAB_FRAMEWORK_CORE_FLOAT_BOUNDS_H_
#define SPECLAB_FRAMEWORK_CORE_FLOAT_BOUNDS_H_

#include <cstdint>
#include <limits>

namespace speclab::float_bounds {

// Unit roundoff u = 2^-p of a type with p significand bits (implicit bit included).
inline constexpr double kFloat64Roundoff = 0x1p-53;
inline constexpr double kFloat32Roundoff = 0x1p-24;
inline constexpr double kFloat16Roundoff = 0x1p-11;
inline constexpr double kBFloat16Roundoff = 0x1p-8;

// gamma(n) for n operations at unit roundoff u; infinity where n u >= 1 (no bound).
inline constexpr double Gamma(int64_t n, double u) {
  const double nu = static_cast<double>(n) * u;
  return nu < 1.0 ? nu / (1.0 - nu) : std::numeric_limits<double>::infinity();
}

}  // namespace speclab::float_bounds

#endif  // SPECLAB_FRAMEWORK_CORE_FLOAT_BOUNDS_H_
