// gradcheck: the engine's gradients against central finite differences, in f64.
#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "tensor/random.h"

namespace sprig {
namespace {

constexpr uint64_t kProjectionSeed = 0x5eed;

// "[1, 2]": the row-major multi-index of flat element `flat` of `shape`.
std::string element_str(int64_t flat, const Shape& shape) {
  Shape index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_str(index);
}

// sum(f(xs) * r) evaluated without building a graph.
double projected_output(const GradcheckFn& f, const std::vector<Tensor>& xs,
                        const std::vector<double>& r) {
  NoGradGuard no_grad;
  std::vector<Var> vars(xs.begin(), xs.end());
  const std::vector<double> out = f(vars).value().to_vector<double>();
  double total = 0;
  for (size_t k = 0; k < out.size(); ++k) total += out[k] * r[k];
  return total;
}

}  // namespace

Tensor numeric_gradient(const std::function<double()>& f, const Tensor& x, double eps) {
  if (x.dtype() != DType::f64 || !x.device().is_cpu() || !x.is_contiguous())
    throw std::invalid_argument("[numeric_gradient] x must be contiguous f64 on the cpu, got " +
                                x.describe());
  Tensor grad = Tensor::empty(x.shape(), DType::f64);
  double* xp = x.data<double>();
  double* gp = grad.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double saved = xp[i];
    xp[i] = saved + eps;
    const double plus = f();
    xp[i] = saved - eps;
    const double minus = f();
    xp[i] = saved;
    gp[i] = (plus - minus) / (2 * eps);
  }
  return grad;
}

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs, double eps,
                          double atol, double rtol) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].dtype() != DType::f64 || !inputs[i].device().is_cpu())
      throw std::invalid_argument("[gradcheck] input " + std::to_string(i) +
                                  " must be f64 on the cpu, got " + inputs[i].describe());

  // Analytic gradients of sum(out * r): backward seeded with r.
  std::vector<Var> leaves;
  for (const Tensor& x : inputs) leaves.emplace_back(x.clone(), true);
  const Var out = f(leaves);
  Generator gen(kProjectionSeed);
  const Tensor r = normal(out.shape(), 0.0, 1.0, DType::f64, Device::cpu(), gen);
  if (out.requires_grad()) out.backward(r);
  const std::vector<double> r_values = r.to_vector<double>();

  // Numeric gradients, one element at a time, on private copies of the inputs.
  std::vector<Tensor> xs;
  for (const Tensor& x : inputs) xs.push_back(x.clone());
  GradcheckResult result;
  double worst_excess = 0, largest_diff = 0;
  int64_t mismatches = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& g = leaves[i].grad();
    const std::vector<double> analytic =
        g.defined() ? g.to_vector<double>() : std::vector<double>(xs[i].numel(), 0.0);
    const std::vector<double> numerics =
        numeric_gradient([&] { return projected_output(f, xs, r_values); }, xs[i], eps)
            .to_vector<double>();
    for (int64_t j = 0; j < xs[i].numel(); ++j) {
      const double numeric = numerics[static_cast<size_t>(j)];
      const double diff = std::abs(analytic[j] - numeric);
      const double tol = atol + rtol * std::abs(numeric);
      largest_diff = std::max(largest_diff, diff);
      if (diff <= tol) continue;  // NaNs fall through as mismatches
      ++mismatches;
      const double excess = std::isnan(diff) ? INFINITY : diff - tol;
      if (result.ok || excess > worst_excess) {
        std::ostringstream msg;
        msg.precision(10);
        msg << "input " << i << " element " << element_str(j, xs[i].shape()) << ": analytic "
            << analytic[j] << ", numeric " << numeric << " (|diff| " << diff << " > tol " << tol
            << ")";
        result.message = msg.str();
        result.ok = false;
        worst_excess = excess;
      }
    }
  }
  std::ostringstream summary;
  if (result.ok)
    summary << "max |analytic - numeric| = " << largest_diff;
  else
    summary << result.message << "; " << mismatches << " elements mismatch";
  result.message = summary.str();
  return result;
}

}  // namespace sprig
