// Activation checkpointing: a segment of a forward (a decoder layer) that keeps none of its
// intermediate results for the backward, only its inputs, and runs again inside the backward to
// rebuild them. Memory falls from every layer's activations to one layer's plus each segment's
// inputs, for one more forward of each segment (docs/semantics.md §10.15).
#pragma once

#include <functional>
#include <vector>

#include "autograd/var.h"

namespace sprig {

// A segment: its output from its inputs. It must compute the same values each time it runs (sprig's
// forwards have no random state) and read no leaf that requires grad besides its inputs and the
// parameters passed with it.
using Segment = std::function<Var(const std::vector<Var>& inputs)>;

// segment(inputs), checkpointed when a gradient is recorded (grad mode on and an input or a
// parameter requiring grad; otherwise simply segment(inputs)). The forward runs without recording;
// the backward reruns it with recording and backpropagates through the rerun with grad(), so its
// parameters' gradients reach them through this one node, after the rest of the backward, and
// accumulate and run their grad hooks once, as without checkpointing. Gradients are bitwise those
// of the unchecked segment. Throws "[grad] ..." in the backward when the segment read a leaf that
// requires grad and was not passed, and at once "[checkpoint] ..." for a parameter that is not a
// leaf.
Var checkpoint(const Segment& segment, const std::vector<Var>& inputs,
               const std::vector<Var>& parameters);

}  // namespace sprig
