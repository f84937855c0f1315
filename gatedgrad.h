// gatedgrad.h — everything a program needs, in one include.
#pragma once
#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tensor/tensor.h"
