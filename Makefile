# gptrain Makefile. `make` builds what this machine can; `make test` runs every test that can run here.
CXX      ?= g++
# -fno-math-errno -fno-trapping-math change no result (no FP traps are ever enabled, errno is
# never read): they let loops with sqrt (AdamW) and llmc/cpu/vmath.h's exp vectorize.
CXXFLAGS ?= -O3 -march=native -std=c++17 -Wall -Wextra -Wno-unused-parameter -fopenmp -fno-math-errno -fno-trapping-math
LDLIBS   ?= -lm
PYTHON   ?= /usr/bin/python3

HEADERS := $(wildcard llmc/*.h llmc/cpu/*.h data/*.h)

# MPI (Open MPI's mpicxx) when present: train_gpt_cpu then runs under mpirun. NO_MPI=1 builds
# without it (multi-process runs then use -pi fs / -pi tcp, llmc/comm_socket.h).
MPICXX := $(if $(NO_MPI),,$(shell command -v mpicxx 2>/dev/null))
ifneq ($(MPICXX),)
MPI_CFLAGS := -DUSE_MPI $(shell $(MPICXX) --showme:compile)
MPI_LDLIBS := $(shell $(MPICXX) --showme:link)
endif

# The configuration a build used, one stamp file per kind of program: rewritten (at parse time)
# only when the configuration changes, and a prerequisite of every program of that kind, so a
# machine that gains Open MPI (or NCCL, another GPU, other flags) rebuilds what depends on it
# instead of keeping a binary that was built without. config_stamp(FILE, TEXT)
config_stamp = $(shell mkdir -p build && printf '%s\n' '$(2)' | cmp -s - $(1) 2>/dev/null || printf '%s\n' '$(2)' > $(1))$(1)
CONFIG_CPU := $(call config_stamp,build/.config-cpu,$(CXX) $(CXXFLAGS) $(LDLIBS) mpi=[$(MPICXX) $(MPI_CFLAGS) $(MPI_LDLIBS)])

.PHONY: all test bench-cpu clean
all: train_gpt_cpu tokenize export_hf import_hf generate plan

train_gpt_cpu: train_gpt.cpp $(HEADERS) $(CONFIG_CPU)
	$(CXX) $(CXXFLAGS) $(MPI_CFLAGS) -pthread -o $@ $< $(LDLIBS) $(MPI_LDLIBS)

tokenize: data/tokenize.cpp $(HEADERS) $(CONFIG_CPU)
	$(CXX) $(CXXFLAGS) -o $@ $< $(LDLIBS) -lpthread

# Hugging Face interop: llm.c checkpoint <-> model.safetensors + config.json
export_hf: export_hf.cpp $(HEADERS) $(CONFIG_CPU)
	$(CXX) $(CXXFLAGS) -o $@ $< $(LDLIBS)

import_hf: import_hf.cpp $(HEADERS) $(CONFIG_CPU)
	$(CXX) $(CXXFLAGS) -o $@ $< $(LDLIBS)

# sampling from a checkpoint with a KV cache (the GPU's generate_fp32/_bf16 are in cuda.mk)
generate: generate.cpp $(HEADERS) $(CONFIG_CPU)
	$(CXX) $(CXXFLAGS) -o $@ $< $(LDLIBS)

# the planner of a large run: memory per GPU, GPUs needed, PREDICTED step time (llmc/plan.h)
plan: plan.cpp $(HEADERS) $(CONFIG_CPU)
	$(CXX) $(CXXFLAGS) -o $@ $< $(LDLIBS)

# test programs: test/test_foo.cpp -> build/test_foo
build/%: test/%.cpp $(HEADERS) $(CONFIG_CPU)
	@mkdir -p build
	$(CXX) $(CXXFLAGS) -o $@ $< $(LDLIBS)

# the test headers a program includes (test/*.h is not in HEADERS)
build/test_llama_debug: test/debug_checks.h test/llama_debug_state.h

build/bench_cpu: dev/bench_cpu.cpp $(HEADERS) $(CONFIG_CPU)
	@mkdir -p build
	$(CXX) $(CXXFLAGS) -o $@ $< $(LDLIBS)

# (test/test_emu_*.cpp are the emulated GPU's, built by emu.mk)
TEST_PROGRAMS := $(patsubst test/%.cpp,build/%,$(filter-out test/test_emu_%,$(wildcard test/test_*.cpp)))

test: all $(TEST_PROGRAMS)
	PYTHON=$(PYTHON) bash test/run_tests.sh

# the matmul kernel's GFLOP/s and share of the FMA peak, d12 training steps with where their time
# goes, the AVX2+FMA build beside an AVX-512 one, and PyTorch's step side by side (dev/bench_cpu.sh)
bench-cpu: build/bench_cpu
	CXX="$(CXX)" CXXFLAGS="$(CXXFLAGS)" PYTHON=$(PYTHON) bash dev/bench_cpu.sh

clean:
	rm -rf build train_gpt_cpu train_gpt_fp32 train_gpt_bf16 train_gpt_fp8 tokenize export_hf import_hf generate plan \
	       generate_fp32 generate_bf16 train_gpt_fp32_emu train_gpt_bf16_emu train_gpt_fp8_emu generate_fp32_emu generate_bf16_emu

# CUDA: dev/cuda kernel checks now, the GPU trainers next (see cuda.mk)
-include cuda.mk

# The emulated GPU: the same CUDA sources built for the CPU (see emu.mk)
-include emu.mk
