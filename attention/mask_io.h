// Masks in and out of files: JSON mask specs (the input of `sprig mask`) and the dense dump as
// safetensors (tools/viz/mask_image.h draws them).
//
// Spec kinds (optional fields marked ?; a sliding_window, when given, is >= 1):
//   {"kind": "causal", "length": T, "sliding_window"?: W}
//   {"kind": "documents", "seq_lens": [...], "length"?: T, "sliding_window"?: W}
//       (length defaults to the sum; padding beyond the sum joins the last document)
//   {"kind": "prefix_tree", "node_lengths": [...], "sample_paths": [[...], ...]}
//   {"kind": "dflash", "ctx_len": S, "block_size": bs, "anchors": [...], "keep": [...],
//    "causal"?: false, "seq_lens"?: [...], "sliding_window"?: W}
//       (keep holds booleans or 0/1; the mask is [N * bs, S + N * bs] as docs/semantics.md §2.7)
// Unknown kinds and fields, wrong types and bad values throw std::invalid_argument.
#pragma once

#include <map>
#include <string>

#include "attention/mask.h"

namespace sprig {

Mask parse_mask_spec(const std::string& json_text);  // errors "[mask] ..."
Mask load_mask_spec(const std::string& path);        // errors "<path>: [mask] ..."

// Writes the tensor "mask": U8 [q_len, k_len], 1 where allowed, with `metadata`.
void save_mask_safetensors(const Mask& mask, const std::string& path,
                           std::map<std::string, std::string> metadata = {});

}  // namespace sprig
