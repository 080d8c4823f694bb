// cuda_runtime.h for the emulated GPU: everything is in llmc/emu/emu.h
#pragma once
#include "../emu.h"
