// the emulated PTX instructions (llmc/emu/ptx.h), for llmc/cuda/ptx.cuh
#pragma once
#include "../ptx.h"
