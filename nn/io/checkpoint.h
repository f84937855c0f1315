// checkpoint.h — saving and loading modules (and optimiser state) as safetensors files.
//
// A checkpoint is a plain safetensors file (nn/io/safetensors.h): one tensor per state_dict()
// entry under its dotted name ("blocks.0.attn.w_q.weight"), F32/F64/BF16/I64 as the tensor's
// dtype, string metadata in "__metadata__". It opens unchanged in PyTorch or NumPy. A training
// checkpoint keeps float32 master weights even when the run trains in bfloat16; export_model
// writes a bfloat16 copy for sharing.
//
// Loading is all or nothing: every name, shape and dtype is checked before the first
// byte is copied, and the bytes go into the module's existing storage, so the Tensor
// handles that modules and optimisers hold stay valid. Errors are std::runtime_error
// with one line "checkpoint: <path>: ..." naming the tensor and what did not match.
#pragma once
#include <map>
#include <string>

#include "nn/module.h"
#include "nn/transformer.h"

namespace gg::nn {

using Metadata = std::map<std::string, std::string>;

// Writes module.state_dict() followed by `extra` (say, optimiser state under an "optim."
// prefix; names must not collide) and the metadata (the trainer puts the model config
// JSON under "config"). The file is replaced atomically.
void save(const Module& module, const std::string& path, const Metadata& metadata = {},
          const NamedTensors& extra = {});

// Reads `path` into the module in place and returns its metadata. The file must hold
// exactly the module's state_dict() plus the tensors listed in *extra, each with the
// same shape and dtype and only finite values; the *extra tensors are filled in place too. So, to restore an
// optimiser along with its model:
//     NamedTensors extra = with_prefix("optim.", opt.state_dict());
//     nn::load(model, path, &extra);
Metadata load(Module& module, const std::string& path, NamedTensors* extra = nullptr);

// Every tensor of a file, newly allocated on the CPU, in file order; with `metadata`, the
// file's metadata too, from the same read.
NamedTensors load_tensors(const std::string& path, Metadata* metadata = nullptr);
// Writes any named tensors; save() is this on a module's state.
void save_tensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});

// The language model a checkpoint of ours holds (Trainer::save, export --out, import-hf), its
// LMConfig read from the metadata ("config"): the config is validated, and its weights must fit
// in `memory` bytes (0: what this process may use, named in the error), before any is allocated; NaN or infinite weights are refused; optimiser
// and trainer state are skipped; bfloat16 weights (an export) widen exactly to float32. With
// `metadata`, the file's metadata too. Errors are std::runtime_error "checkpoint: <path>: ...".
std::shared_ptr<GatedTransformerLM> load_checkpoint(const std::string& path, uint64_t memory = 0,
                                                    Metadata* metadata = nullptr);

// Writes module.state_dict() with every float32 tensor converted to `dtype` (bf16: half the
// bytes, each weight rounded to 8 significant bits) and the metadata: a copy for sharing or
// inference. A model loads it back only after the same conversion (the file's dtypes must match).
void export_model(const Module& module, const std::string& path, DType dtype, const Metadata& metadata = {});

// Throws std::runtime_error("<context>: tensor '<name>' holds a NaN ...") for the first
// floating tensor with a value that is not finite: a corrupt file, or a run that
// diverged, never a model to continue from. load() checks what it loads.
void check_finite(const NamedTensors& tensors, const std::string& context);

// The same tensors with `prefix` in front of every name.
NamedTensors with_prefix(const std::string& prefix, const NamedTensors& tensors);

}  // namespace gg::nn
