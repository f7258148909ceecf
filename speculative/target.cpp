#include "speculative/target.h"

#include "autograd/functions.h"

namespace sprig::speculative {

FrozenTarget::FrozenTarget(std::unique_ptr<QwenForCausalLM> model, Device device, DType dtype)
    : model_(std::move(model)), device_(device) {
  model_->to(device, dtype);
  model_->set_requires_grad(false);
  model_->train(false);
}

Tensor FrozenTarget::capture(const DraftRows& rows, const std::vector<int64_t>& layers,
                             Tensor* logits) const {
  rows.check();
  NoGradGuard no_grad;
  const Tensor ids = rows.input_ids.to(device_);
  const QwenInput in =
      rows.packed() ? documents_input(ids, rows.position_ids.to(device_), rows.doc_lens, config())
                    : causal_input(ids, config());
  Var final_hidden;
  std::vector<Tensor> captured;
  for (const Var& h : model_->model.layer_outputs(in, layers, logits ? &final_hidden : nullptr))
    captured.push_back(h.value());
  if (logits) *logits = model_->logits(final_hidden).value();
  return concat(captured, 2);
}

Var FrozenTarget::embed(const Tensor& ids) const {
  NoGradGuard no_grad;
  return model_->model.embed_tokens.forward(ids.to(device_));
}

int64_t FrozenTarget::parameters_up_to(int64_t layer) const {
  int64_t n = model_->model.embed_tokens.num_parameters();
  for (int64_t i = 0; i <= layer && i < static_cast<int64_t>(model_->model.layers.size()); ++i)
    n += model_->model.layers[static_cast<size_t>(i)]->num_parameters();
  return n;
}

}  // namespace sprig::speculative
