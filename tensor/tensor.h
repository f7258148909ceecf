// Tensor: a strided view (shape, strides in elements, offset) of a shared Storage, with a DType and
// a Device. Views (view, reshape, transpose, permute, slice, narrow, expand, ...) share storage;
// contiguous(), to(), clone() copy. The raw ops that compute on tensors live in tensor/ops.h.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/storage.h"

namespace sprig {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& shape);  // "[2, 3]"
int64_t shape_numel(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;  // undefined tensor

  // ---- creation -----------------------------------------------------------------------------
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
                     Device device = Device::cpu());
  static Tensor arange(int64_t n, DType dtype = DType::i64, Device device = Device::cpu());
  // Copies host values (converted to `dtype`, default: T's own dtype) into a new tensor.
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape,
                            Device device = Device::cpu());
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape, DType dtype,
                            Device device = Device::cpu());
  static Tensor scalar(double value, DType dtype = DType::f32, Device device = Device::cpu()) {
    return full({}, value, dtype, device);
  }

  // ---- reading values -------------------------------------------------------------------------
  // All elements in row-major order, converted to T (copies from the device when needed).
  template <class T> std::vector<T> to_vector() const;
  double item() const;  // the single element of a one-element tensor, as double

  // ---- metadata -------------------------------------------------------------------------------
  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  Device device() const;
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  bool shares_storage(const Tensor& other) const { return storage_ == other.storage_; }

  // Pointer to the first element (storage + offset).
  void* data_ptr() const;
  template <class T> T* data() const;  // checks that T matches dtype()

  // ---- views (share storage) -----------------------------------------------------------------
  Tensor view(const Shape& shape) const;     // needs compatible strides; one -1 allowed
  Tensor reshape(const Shape& shape) const;  // view when possible, else a contiguous copy
  Tensor flatten() const { return reshape({-1}); }
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;  // removes `dim`
  Tensor expand(const Shape& shape) const;  // size-1 dims broadcast with stride 0; -1 keeps a dim
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;

  // ---- copies ---------------------------------------------------------------------------------
  Tensor contiguous() const;       // self when already contiguous
  Tensor to(Device device) const;  // self when already there
  Tensor to(DType dtype) const;    // self when already that dtype
  Tensor to(Device device, DType dtype) const;
  Tensor clone() const;                 // always a fresh contiguous copy
  void copy_(const Tensor& src) const;  // same shape (src may broadcast), any dtype/device
  void fill_(double value) const;
  void zero_() const { fill_(0.0); }

  std::string str(int64_t max_per_dim = 6) const;  // printable summary with values
  std::string describe() const;                    // "Tensor[2, 3] f32 cpu"

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_, strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::f32;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

Shape contiguous_strides(const Shape& shape);
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op);  // throws invalid_argument

}  // namespace sprig
