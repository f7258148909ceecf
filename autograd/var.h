// Var: what nn code computes with. A Tensor value, an optional gradient, and the graph node that
// produced it. Implemented by the autograd library.
#pragma once

#include "tensor/tensor.h"
