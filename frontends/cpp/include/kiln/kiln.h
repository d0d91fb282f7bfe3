// The umbrella header of the Kiln SDK: tensors and ops, kiln::compile, kiln::nn modules, state dicts, configuration.
#pragma once

#include "kiln/autograd.h"
#include "kiln/caches.h"
#include "kiln/capture/autocast.h"
#include "kiln/capture/grad_mode.h"
#include "kiln/capture/capture.h"
#include "kiln/compile.h"
#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/custom_op.h"
#include "kiln/graph/error.h"
#include "kiln/nn.h"
#include "kiln/optim.h"
#include "kiln/ops.h"
#include "kiln/state_dict.h"
#include "kiln/tensor.h"
