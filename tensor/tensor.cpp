#include "tensor/tensor.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <numeric>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "tensor/ops/dispatch.h"

namespace sprig {

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= ndim)
    throw std::invalid_argument(std::string("[") + op + "] dim " + std::to_string(dim) +
                                " is out of range for a tensor with " + std::to_string(ndim) +
                                " dimensions");
  return d;
}

// ---- creation ---------------------------------------------------------------------------------

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    if (d < 0) throw std::invalid_argument("[empty] negative size in shape " + shape_str(shape));
  if (device.is_cuda() && device.index >= cuda::device_count())
    throw std::invalid_argument("[empty] device " + device.str() + " is not available (" +
                                std::to_string(cuda::device_count()) + " CUDA devices)");
  size_t bytes = dtype_size(dtype);
  for (int64_t d : shape)
    if (__builtin_mul_overflow(bytes, static_cast<size_t>(d), &bytes))
      throw std::invalid_argument("[empty] a " + std::string(dtype_name(dtype)) +
                                  " tensor of shape " + shape_str(shape) +
                                  " needs more bytes than memory can address");
  Tensor t;
  t.storage_ = std::make_shared<Storage>(bytes, device);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::arange(int64_t n, DType dtype, Device device) {
  std::vector<int64_t> v(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::iota(v.begin(), v.end(), 0);
  return from_vector(v, {static_cast<int64_t>(v.size())}, dtype, device);
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  return from_vector(values, shape, dtype_of<T>(), device);
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, DType dtype,
                           Device device) {
  if (static_cast<int64_t>(values.size()) != shape_numel(shape))
    throw std::invalid_argument("[from_vector] " + std::to_string(values.size()) +
                                " values do not fill shape " + shape_str(shape));
  Tensor host = empty(shape, dtype_of<T>());
  std::copy(values.begin(), values.end(), host.data<T>());
  return host.to(device, dtype);
}

template <class T> std::vector<T> Tensor::to_vector() const {
  const Tensor host = to(Device::cpu(), dtype_of<T>()).contiguous();
  const T* p = host.data<T>();
  return std::vector<T>(p, p + host.numel());
}

double Tensor::item() const {
  if (numel() != 1)
    throw std::invalid_argument("[item] expected one element, got shape " + shape_str(shape_));
  return to_vector<double>()[0];
}

#define SPRIG_INSTANTIATE(T)                                                                  \
  template Tensor Tensor::from_vector<T>(const std::vector<T>&, const Shape&, Device);        \
  template Tensor Tensor::from_vector<T>(const std::vector<T>&, const Shape&, DType, Device); \
  template std::vector<T> Tensor::to_vector<T>() const;
SPRIG_INSTANTIATE(float)
SPRIG_INSTANTIATE(double)
SPRIG_INSTANTIATE(bf16)
SPRIG_INSTANTIATE(f16)
SPRIG_INSTANTIATE(int32_t)
SPRIG_INSTANTIATE(int64_t)
SPRIG_INSTANTIATE(bool)
#undef SPRIG_INSTANTIATE

// ---- metadata ---------------------------------------------------------------------------------

Device Tensor::device() const { return storage_ ? storage_->device() : Device::cpu(); }

int64_t Tensor::size(int64_t d) const { return shape_[normalize_dim(d, dim(), "size")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

void* Tensor::data_ptr() const {
  if (!storage_) throw std::invalid_argument("[data_ptr] tensor is undefined");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

template <class T> T* Tensor::data() const {
  if (dtype_of<T>() != dtype_)
    throw std::invalid_argument(std::string("[data] tensor has dtype ") + dtype_name(dtype_) +
                                ", requested " + dtype_name(dtype_of<T>()));
  return static_cast<T*>(data_ptr());
}
template float* Tensor::data<float>() const;
template double* Tensor::data<double>() const;
template bf16* Tensor::data<bf16>() const;
template f16* Tensor::data<f16>() const;
template int32_t* Tensor::data<int32_t>() const;
template int64_t* Tensor::data<int64_t>() const;
template bool* Tensor::data<bool>() const;

// ---- views ------------------------------------------------------------------------------------

namespace {

// Resolves one -1 entry and checks the element count.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0) throw std::invalid_argument(std::string("[") + op + "] only one -1 allowed");
      infer = static_cast<int64_t>(i);
    } else if (out[i] < 0) {
      throw std::invalid_argument(std::string("[") + op + "] invalid shape " + shape_str(shape));
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0 && known > 0 && numel % known == 0) out[infer] = numel / known;
  if (shape_numel(out) != numel || (infer >= 0 && known == 0))
    throw std::invalid_argument(std::string("[") + op + "] shape " + shape_str(shape) +
                                " is invalid for " + std::to_string(numel) + " elements");
  return out;
}

// Strides for viewing (shape, strides) as new_shape without a copy, or empty when impossible
// (the algorithm merges runs of dimensions that are contiguous with each other).
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides,
                                  const Shape& new_shape) {
  Shape out(new_shape.size());
  if (shape_numel(shape) == 0 || shape.empty()) return contiguous_strides(new_shape);
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset) const {
  Tensor t = *this;
  t.shape_ = shape;
  t.strides_ = strides;
  t.offset_ = offset;
  return t;
}

Tensor Tensor::view(const Shape& shape) const {
  const Shape s = infer_shape(shape, numel(), "view");
  auto st = view_strides(shape_, strides_, s);
  if (!st)
    throw std::invalid_argument("[view] cannot view " + describe() + " as " + shape_str(s) +
                                " without a copy; use reshape");
  return as_strided(s, *st, offset_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  const Shape s = infer_shape(shape, numel(), "reshape");
  if (auto st = view_strides(shape_, strides_, s)) return as_strided(s, *st, offset_);
  return contiguous().view(s);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = normalize_dim(d0, dim(), "transpose");
  d1 = normalize_dim(d1, dim(), "transpose");
  Tensor t = *this;
  std::swap(t.shape_[d0], t.shape_[d1]);
  std::swap(t.strides_[d0], t.strides_[d1]);
  return t;
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  if (static_cast<int64_t>(dims.size()) != dim())
    throw std::invalid_argument("[permute] got " + std::to_string(dims.size()) +
                                " dims for a tensor with " + std::to_string(dim()));
  Tensor t = *this;
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = normalize_dim(dims[i], dim(), "permute");
    if (seen[d]) throw std::invalid_argument("[permute] dim " + std::to_string(d) + " repeated");
    seen[d] = true;
    t.shape_[i] = shape_[d];
    t.strides_[i] = strides_[d];
  }
  return t;
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = normalize_dim(d, dim(), "slice");
  if (step <= 0)
    throw std::invalid_argument("[slice] step must be positive, got " + std::to_string(step));
  const int64_t n = shape_[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Tensor t = *this;
  t.offset_ += start * strides_[d];
  t.shape_[d] = (end - start + step - 1) / step;
  t.strides_[d] *= step;
  return t;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = normalize_dim(d, dim(), "narrow");
  if (start < 0 || length < 0 || start + length > shape_[d])
    throw std::invalid_argument("[narrow] range [" + std::to_string(start) + ", " +
                                std::to_string(start + length) + ") is out of bounds for size " +
                                std::to_string(shape_[d]) + " of dim " + std::to_string(d));
  Tensor t = *this;
  t.offset_ += start * strides_[d];
  t.shape_[d] = length;
  return t;
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = normalize_dim(d, dim(), "select");
  if (index < 0) index += shape_[d];
  if (index < 0 || index >= shape_[d])
    throw std::invalid_argument("[select] index " + std::to_string(index) +
                                " is out of bounds for size " + std::to_string(shape_[d]));
  Tensor t = *this;
  t.offset_ += index * strides_[d];
  t.shape_.erase(t.shape_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  return t;
}

Tensor Tensor::expand(const Shape& shape) const {
  if (shape.size() < shape_.size())
    throw std::invalid_argument("[expand] cannot expand " + shape_str(shape_) + " to " +
                                shape_str(shape));
  Tensor t = *this;
  const size_t lead = shape.size() - shape_.size();
  t.shape_.assign(shape.begin(), shape.end());
  t.strides_.assign(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      if (shape[i] < 0) throw std::invalid_argument("[expand] -1 not allowed for new dims");
      continue;
    }
    const int64_t src = shape_[i - lead];
    const int64_t want = shape[i] == -1 ? src : shape[i];
    if (src == want) {
      t.shape_[i] = src;
      t.strides_[i] = strides_[i - lead];
    } else if (src == 1) {
      t.shape_[i] = want;
    } else {
      throw std::invalid_argument("[expand] cannot expand " + shape_str(shape_) + " to " +
                                  shape_str(shape));
    }
  }
  return t;
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = normalize_dim(d, dim() + 1, "unsqueeze");
  Tensor t = *this;
  const int64_t stride = d < dim() ? strides_[d] * shape_[d] : 1;
  t.shape_.insert(t.shape_.begin() + d, 1);
  t.strides_.insert(t.strides_.begin() + d, stride);
  return t;
}

Tensor Tensor::squeeze(int64_t d) const {
  d = normalize_dim(d, dim(), "squeeze");
  if (shape_[d] != 1)
    throw std::invalid_argument("[squeeze] dim " + std::to_string(d) + " has size " +
                                std::to_string(shape_[d]) + ", not 1");
  Tensor t = *this;
  t.shape_.erase(t.shape_.begin() + d);
  t.strides_.erase(t.strides_.begin() + d);
  return t;
}

// ---- copies -----------------------------------------------------------------------------------

void Tensor::copy_(const Tensor& src) const {
  if (!defined() || !src.defined()) throw std::invalid_argument("[copy_] undefined tensor");
  const Tensor s = src.shape_ == shape_ ? src : src.expand(shape_);
  if (s.device() == device()) {
    SPRIG_DISPATCH(device(), copy, s, *this);
    return;
  }
  // Across devices: convert on the source device, move contiguous bytes, then scatter.
  const Tensor packed = s.to(dtype_).contiguous();
  Tensor landing = is_contiguous() ? *this : empty(shape_, dtype_, device());
  if (device().is_cuda()) {
    cuda::copy_host_to_device(landing.data_ptr(), packed.data_ptr(), packed.nbytes(),
                              device().index);
  } else {
    cuda::copy_device_to_host(landing.data_ptr(), packed.data_ptr(), packed.nbytes(),
                              packed.device().index);
  }
  if (!landing.shares_storage(*this)) copy_(landing);
}

void Tensor::fill_(double value) const {
  if (numel() == 0) return;
  if (!is_contiguous()) {
    Tensor tmp = full(shape_, value, dtype_, device());
    copy_(tmp);
    return;
  }
  SPRIG_DISPATCH(device(), fill, *this, value);
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape_, dtype_, device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device device) const { return to(device, dtype_); }
Tensor Tensor::to(DType dtype) const { return to(device(), dtype); }

Tensor Tensor::to(Device dev, DType dtype) const {
  if (dev == device() && dtype == dtype_) return *this;
  Tensor out = empty(shape_, dtype, dev);
  out.copy_(*this);
  return out;
}

// ---- printing ---------------------------------------------------------------------------------

std::string Tensor::describe() const {
  if (!defined()) return "Tensor(undefined)";
  return "Tensor" + shape_str(shape_) + " " + dtype_name(dtype_) + " " + device().str();
}

std::string Tensor::str(int64_t max_per_dim) const {
  if (!defined()) return describe();
  const std::vector<double> v = to_vector<double>();
  std::ostringstream os;
  os << std::setprecision(6);
  // Recursive printer over the row-major values, eliding the middle of long dims.
  const Shape strides = contiguous_strides(shape_);
  std::function<void(int64_t, int64_t)> rec = [&](int64_t d, int64_t base) {
    if (d == dim()) {
      os << v[base];
      return;
    }
    os << "[";
    const int64_t n = shape_[d];
    for (int64_t i = 0; i < n; ++i) {
      if (n > max_per_dim && i == max_per_dim / 2) {
        os << "...";
        i = n - max_per_dim / 2 - 1;
        if (i + 1 < n) os << ", ";
        continue;
      }
      rec(d + 1, base + i * strides[d]);
      if (i + 1 < n) os << ", ";
    }
    os << "]";
  };
  rec(0, 0);
  return describe() + "\n" + os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace sprig
