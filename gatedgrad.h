// gatedgrad.h — the whole library in one include, as torch/torch.h: tensors and autograd,
// the modules (every gated-attention variant, the transformer LM), optimisers and
// schedules, safetensors checkpoints, the BPE tokenizer, data and the trainer, and the analyses.
#pragma once
#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/random.h"
#include "tensor/tensor.h"
// The CUDA device's queries; including it also registers Device::CUDA's backend.
#include "cuda/cuda.h"

#include "nn/attention.h"
#include "nn/config_fields.h"
#include "nn/files.h"
#include "nn/hooks.h"
#include "nn/gated_deltanet.h"
#include "nn/layers.h"
#include "nn/mla.h"
#include "nn/module.h"
#include "nn/moe.h"
#include "nn/rope.h"
#include "nn/transformer.h"
#include "nn/untrusted.h"

#include "nn/optim/optimizer.h"
#include "nn/optim/schedule.h"

#include "nn/io/checkpoint.h"
#include "nn/io/hf.h"
#include "nn/io/model.h"
#include "nn/io/safetensors.h"

#include "nn/text/bpe.h"
#include "nn/text/byte_tokenizer.h"

#include "distributed/agreement.h"
#include "distributed/gradient_buckets.h"
#include "distributed/process_group.h"

#include "nn/train/data.h"
#include "nn/train/log_file.h"
#include "nn/train/run_lock.h"
#include "nn/train/synthetic.h"
#include "nn/train/train_config.h"
#include "nn/train/trainer.h"

#include "nn/analysis/activation_cache.h"
#include "nn/analysis/analysis.h"
#include "nn/analysis/interventions.h"
#include "nn/analysis/logit_lens.h"
#include "nn/analysis/stability.h"
#include "nn/analysis/text_loss.h"
#include "nn/analysis/plot.h"
#include "nn/analysis/report.h"
#include "nn/analysis/training_log.h"
