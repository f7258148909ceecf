// gru_cell and gru_cell_backward (with their _into forms): argument checks and dispatch to
// tensor/cpu/gru.cpp or tensor/cuda/gru.cu, in the inputs' own dtype. The kernels take 2-D
// tensors with unit column stride and any row stride, so one step's slice of a sequence buffer
// (e.g. x[:, t] of a batch-major [R, T, .] tensor) is read or written in place.
#include "tensor/ops.h"
#include "tensor/ops/dispatch.h"

namespace sprig {

using detail::check_dim;
using detail::check_float_input;
using detail::check_same_device;
using detail::check_same_dtype;
using detail::check_shape;
using detail::fail;

namespace {

// A floating input of `shape` with `like`'s dtype and device.
void check_input(const char* op, const Tensor& t, const Shape& shape, const Tensor& like,
                 const char* name) {
  check_float_input(op, t, name);
  check_shape(op, t, shape, name);
  check_same_dtype(op, like, t);
  check_same_device(op, {&like, &t});
}

// An output: as an input, with unit column stride and rows that do not overlap (the kernels
// write it directly).
void check_output(const char* op, const Tensor& t, const Shape& shape, const Tensor& like,
                  const char* name) {
  check_input(op, t, shape, like, name);
  const int64_t rows = t.size(0), cols = t.size(1);
  const bool unit_columns = cols <= 1 || t.strides()[1] == 1;
  if (t.numel() > 0 && (!unit_columns || (rows > 1 && t.strides()[0] < cols)))
    fail(op, std::string(name) + " must have unit column stride and non-overlapping rows, got " +
                 "strides " + shape_str(t.strides()));
}

// An input as the kernels read it: itself when its columns have unit stride, else a copy.
Tensor as_rows(const Tensor& t) {
  return t.size(1) <= 1 || t.strides()[1] == 1 ? t : t.contiguous();
}

// Checks gi, gh [R, 3G] and h_prev [R, G]; returns {R, G}.
Shape check_gru_cell(const char* op, const Tensor& gi, const Tensor& gh, const Tensor& h_prev) {
  check_float_input(op, gi, "gi");
  check_dim(op, gi, 2, "gi");
  if (gi.size(1) % 3 != 0)
    fail(op, "gi must be [R, 3G], got " + shape_str(gi.shape()) + " (" +
                 std::to_string(gi.size(1)) + " columns is not a multiple of 3)");
  const Shape rg{gi.size(0), gi.size(1) / 3};
  check_input(op, gh, gi.shape(), gi, "gh");
  check_input(op, h_prev, rg, gi, "h_prev");
  return rg;
}

// Checks dh [R, G], h_prev [R, G] and gates [R, 4G]; returns {R, G}.
Shape check_gru_cell_backward(const char* op, const Tensor& dh, const Tensor& h_prev,
                              const Tensor& gates) {
  check_float_input(op, dh, "dh");
  check_dim(op, dh, 2, "dh");
  check_input(op, h_prev, dh.shape(), dh, "h_prev");
  check_input(op, gates, {dh.size(0), 4 * dh.size(1)}, dh, "gates");
  return dh.shape();
}

}  // namespace

void gru_cell_into(const Tensor& gi, const Tensor& gh, const Tensor& h_prev, const GruCell& out) {
  const char* op = "gru_cell";
  const Shape rg = check_gru_cell(op, gi, gh, h_prev);
  check_output(op, out.h, rg, gi, "h");
  check_output(op, out.gates, {rg[0], 4 * rg[1]}, gi, "gates");
  if (out.h.numel() > 0)
    SPRIG_DISPATCH(gi.device(), gru_cell, as_rows(gi), as_rows(gh), as_rows(h_prev), out.h,
                   out.gates);
}

GruCell gru_cell(const Tensor& gi, const Tensor& gh, const Tensor& h_prev) {
  const Shape rg = check_gru_cell("gru_cell", gi, gh, h_prev);
  const GruCell out{Tensor::empty(rg, gi.dtype(), gi.device()),
                    Tensor::empty({rg[0], 4 * rg[1]}, gi.dtype(), gi.device())};
  gru_cell_into(gi, gh, h_prev, out);
  return out;
}

void gru_cell_backward_into(const Tensor& dh, const Tensor& h_prev, const Tensor& gates,
                            const GruCellGrads& out) {
  const char* op = "gru_cell_backward";
  const Shape rg = check_gru_cell_backward(op, dh, h_prev, gates);
  const Shape r3g{rg[0], 3 * rg[1]};
  check_output(op, out.dgi, r3g, dh, "dgi");
  check_output(op, out.dgh, r3g, dh, "dgh");
  check_output(op, out.dh_prev, rg, dh, "dh_prev");
  if (dh.numel() > 0)
    SPRIG_DISPATCH(dh.device(), gru_cell_backward, as_rows(dh), as_rows(h_prev), as_rows(gates),
                   out.dgi, out.dgh, out.dh_prev);
}

GruCellGrads gru_cell_backward(const Tensor& dh, const Tensor& h_prev, const Tensor& gates) {
  const Shape rg = check_gru_cell_backward("gru_cell_backward", dh, h_prev, gates);
  const Shape r3g{rg[0], 3 * rg[1]};
  const GruCellGrads out{Tensor::empty(r3g, dh.dtype(), dh.device()),
                         Tensor::empty(r3g, dh.dtype(), dh.device()),
                         Tensor::empty(rg, dh.dtype(), dh.device())};
  gru_cell_backward_into(dh, h_prev, gates, out);
  return out;
}

}  // namespace sprig
