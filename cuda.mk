# cuda.mk: the CUDA part of the build, included by the Makefile (or run alone:
# `make -f cuda.mk cuda-dev -j16`). Defines NVCC, NVCC_FLAGS, NVCC_LDLIBS and the dev/cuda
# programs: build/cuda/<op>_fp32 and build/cuda/<op>_bf16, one per dev/cuda/<op>.cu.
#
# GPU arch: the compute capability of GPU 0 when nvidia-smi finds one, sm_90a on H100/H200 (sm_90
# with Hopper's own instructions, which the wgmma attention of -ak 3 needs; the other kernels
# compile as for sm_90), else sm_90a + sm_80 (a machine without a GPU compiles for the GPUs we target).
# Override with `make CUDA_ARCH_FLAGS="-gencode arch=compute_80,code=sm_80"`.

NVCC ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)

CUDA_GPU_CC := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')
CUDA_GPU_ARCH := $(CUDA_GPU_CC)$(if $(filter 90,$(CUDA_GPU_CC)),a)
ifneq ($(CUDA_GPU_CC),)
CUDA_ARCH_FLAGS ?= -gencode arch=compute_$(CUDA_GPU_ARCH),code=sm_$(CUDA_GPU_ARCH)
else
CUDA_ARCH_FLAGS ?= -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_80,code=sm_80
endif

# -diag-suppress 1675: nvcc does not know "#pragma GCC unroll" in llmc/cpu/matmul.h.
# -Xcompiler -fopenmp: the CPU references in llmc/cpu use OpenMP (the GPT-2-sized checks
# would take minutes on one core).
# CUDA_COMPILE_CHECK=1 (scripts/test.sh on a machine without a GPU): the programs are built only
# to show that they compile for both targets, and are never run, so the device code is compiled
# for compiling speed (nvcc's -Ofc max, CUDA 12.8 and later): every kernel is still instantiated,
# its PTX generated and assembled for sm_80 and sm_90a (dev/cuda/gqa 52 s -> 18 s; `make -j2
# cuda-all` 9.6 -> 5.4 minutes on this 2-core EPYC, 2026-11-29). test_kernel_resources compiles
# every kernel at full optimization for sm_90a and checks its registers, spills and occupancy.
# Do not run or ship what this builds: the configuration stamp rebuilds it once the flag goes.
# The host code of what it builds is compiled at -O0 (nvcc's -O is the host compiler's level;
# the device code's is -Ofc's): half of a program's compile is g++ on cudafe's output (train_gpt.cu
# bf16: 22.9 of 46 s at -O3, 13.5 at -O0; dev/cuda/layernorm 10.5 -> 7.6 s, 2026-11-30). The
# emulated builds compile the same host code with g++ at -O2 and -Wall.
# CUDA_COMPILE_CHECK=auto (scripts/test.sh): the compile check where nvidia-smi finds no GPU, a
# normal build where it finds one.
CUDA_COMPILE_CHECK_ON := $(or $(filter 1,$(CUDA_COMPILE_CHECK)),$(if $(filter auto,$(CUDA_COMPILE_CHECK)),$(if $(CUDA_GPU_CC),,1)))
CUDA_FAST_COMPILE := $(if $(CUDA_COMPILE_CHECK_ON),$(shell $(NVCC) --help 2>/dev/null | grep -q -- --Ofast-compile && echo -Ofc max))
CUDA_HOST_OPT := $(if $(CUDA_COMPILE_CHECK_ON),-O0,-O3)
NVCC_FLAGS ?= $(CUDA_HOST_OPT) -std=c++17 -lineinfo -diag-suppress 1675 $(CUDA_ARCH_FLAGS) $(CUDA_FAST_COMPILE) \
              -Xcompiler -fopenmp,-march=native,-Wall,-Wno-unused-function
NVCC_LDLIBS ?= -lcublasLt -lcublas -lgomp -lm

CUDA_HEADERS := $(wildcard llmc/*.h llmc/cpu/*.h llmc/cuda/*.cuh dev/cuda/*.cuh)
CUDA_DEV_SRCS := $(wildcard dev/cuda/*.cu)
CUDA_DEV_NAMES := $(patsubst dev/cuda/%.cu,%,$(CUDA_DEV_SRCS))
CUDA_DEV_BINS := $(foreach n,$(CUDA_DEV_NAMES),build/cuda/$(n)_fp32 build/cuda/$(n)_bf16)

# the configuration the CUDA programs are built with (the Makefile's config_stamp): another GPU,
# nvcc or flags rebuild them
CONFIG_CUDA := $(call config_stamp,build/.config-cuda,$(NVCC) $(NVCC_FLAGS) $(NVCC_LDLIBS))
CUDA_HEADERS += $(CONFIG_CUDA)

.PHONY: cuda-dev cuda-dev-clean
cuda-dev: $(CUDA_DEV_BINS)

build/cuda/%_fp32: dev/cuda/%.cu $(CUDA_HEADERS)
	@mkdir -p build/cuda
	$(NVCC) $(NVCC_FLAGS) -o $@ $< $(NVCC_LDLIBS)

build/cuda/%_bf16: dev/cuda/%.cu $(CUDA_HEADERS)
	@mkdir -p build/cuda
	$(NVCC) $(NVCC_FLAGS) -DENABLE_BF16 -o $@ $< $(NVCC_LDLIBS)

# Hopper's warpgroup MMA (wgmma) exists in sm_90a code only: its check and the attention built on
# it are built for that alone (on another GPU they say so and check nothing)
build/cuda/wgmma_fp32 build/cuda/wgmma_bf16 build/cuda/attention_wgmma_fp32 build/cuda/attention_wgmma_bf16: \
    CUDA_ARCH_FLAGS := -gencode arch=compute_90a,code=sm_90a

cuda-dev-clean:
	rm -rf build/cuda

# ---------------------------------------------------------------------------------------
# The GPU trainer and its test against PyTorch, one source each, two precisions:
#   train_gpt_fp32, train_gpt_bf16, train_gpt_fp8           (train_gpt.cu)
#   build/test_gpt2_debug_fp32, build/test_gpt2_debug_bf16  (test/test_gpt2_debug.cu)
#   build/test_llama_debug_fp32, build/test_llama_debug_bf16 (test/test_llama_debug.cu)
#   generate_fp32, generate_bf16                            (generate.cu: sampling, KV cache)
# `make cuda-all` builds them and every dev/cuda program.
CUDA_TRAINER_HEADERS := $(CUDA_HEADERS) llmc/gpt2_cuda.cuh llmc/llama_cuda.cuh llmc/model_cuda.cuh

# Multi-process: MPI when make finds mpicxx (the Makefile's MPICXX), NCCL when its header is
# there (NO_NCCL=1 builds without: several processes then stage through the host).
NCCL_HEADER := $(if $(NO_NCCL),,$(firstword $(wildcard $(dir $(NVCC))../include/nccl.h /usr/include/nccl.h)))
CUDA_MP_FLAGS := $(if $(NCCL_HEADER),-DUSE_NCCL)
CUDA_MP_LIBS := $(if $(NCCL_HEADER),-lnccl)
ifneq ($(MPICXX),)
CUDA_MP_FLAGS += -DUSE_MPI $(addprefix -I,$(shell $(MPICXX) --showme:incdirs))
CUDA_MP_LIBS += $(addprefix -L,$(shell $(MPICXX) --showme:libdirs)) $(addprefix -l,$(shell $(MPICXX) --showme:libs))
endif

# and the multi-process libraries the trainers link: MPI found or not, NCCL found or not
CONFIG_CUDA_MP := $(call config_stamp,build/.config-cuda-mp,$(CUDA_MP_FLAGS) $(CUDA_MP_LIBS))

.PHONY: cuda-all
cuda-all: train_gpt_fp32 train_gpt_bf16 train_gpt_fp8 build/test_gpt2_debug_fp32 build/test_gpt2_debug_bf16 \
          build/test_llama_debug_fp32 build/test_llama_debug_bf16 generate_fp32 generate_bf16 cuda-dev \
          build/cuda/fp8_gemm_probe

# which FP8 GEMMs this GPU's cuBLASLt runs, variant by variant (a diagnosis for a lent GPU; no checks)
build/cuda/fp8_gemm_probe: dev/fp8_gemm_probe.cu $(CONFIG_CUDA)
	@mkdir -p build/cuda
	$(NVCC) $(NVCC_FLAGS) -o $@ $< -lcublasLt

train_gpt_fp32: train_gpt.cu $(CUDA_TRAINER_HEADERS) $(CONFIG_CUDA_MP)
	$(NVCC) $(NVCC_FLAGS) $(CUDA_MP_FLAGS) -o $@ $< $(NVCC_LDLIBS) $(CUDA_MP_LIBS)

train_gpt_bf16: train_gpt.cu $(CUDA_TRAINER_HEADERS) $(CONFIG_CUDA_MP)
	$(NVCC) $(NVCC_FLAGS) $(CUDA_MP_FLAGS) -DENABLE_BF16 -o $@ $< $(NVCC_LDLIBS) $(CUDA_MP_LIBS)

# train_gpt_fp8: the bf16 trainer with FP8 linear layers (-DENABLE_FP8, llmc/cuda/fp8_linear.cuh),
# for the GPUs with FP8 tensor cores only: sm_89 (Ada) and sm_90 (Hopper), the one found when it
# is one of them, else both (a machine without such a GPU still builds it; on another GPU the
# binary stops at start-up). Override with FP8_ARCH_FLAGS.
ifneq ($(filter 89 90,$(CUDA_GPU_CC)),)
FP8_ARCH_FLAGS ?= -gencode arch=compute_$(CUDA_GPU_ARCH),code=sm_$(CUDA_GPU_ARCH)
else
FP8_ARCH_FLAGS ?= -gencode arch=compute_89,code=sm_89 -gencode arch=compute_90a,code=sm_90a
endif
train_gpt_fp8: train_gpt.cu $(CUDA_TRAINER_HEADERS) $(CONFIG_CUDA_MP)
	$(NVCC) $(filter-out $(CUDA_ARCH_FLAGS),$(NVCC_FLAGS)) $(FP8_ARCH_FLAGS) $(CUDA_MP_FLAGS) -DENABLE_BF16 -DENABLE_FP8 \
	    -o $@ $< $(NVCC_LDLIBS) $(CUDA_MP_LIBS)

# Without a GPU, the programs below are compile checks of their host code: their kernels are
# the trainer's and the dev programs' (scripts/kernel_resources.py finds every kernel in those),
# which are compiled for both targets. So these are built for sm_90a alone there, a minute less
# of CI; on a GPU, and with CUDA_ARCH_FLAGS given, they are built for the same GPUs as the rest.
ifeq ($(CUDA_GPU_CC),)
build/test_gpt2_debug_fp32 build/test_gpt2_debug_bf16 build/test_llama_debug_fp32 build/test_llama_debug_bf16 \
    generate_fp32 generate_bf16: CUDA_ARCH_FLAGS := -gencode arch=compute_90a,code=sm_90a
endif

build/test_gpt2_debug_fp32: test/test_gpt2_debug.cu $(CUDA_TRAINER_HEADERS)
	@mkdir -p build
	$(NVCC) $(NVCC_FLAGS) -o $@ $< $(NVCC_LDLIBS)

build/test_gpt2_debug_bf16: test/test_gpt2_debug.cu $(CUDA_TRAINER_HEADERS)
	@mkdir -p build
	$(NVCC) $(NVCC_FLAGS) -DENABLE_BF16 -o $@ $< $(NVCC_LDLIBS)

# the GPU Llama 3 (llmc/llama_cuda.cuh) against test/llama_reference.py's debug states
build/test_llama_debug_fp32: test/test_llama_debug.cu test/debug_checks.h test/llama_debug_state.h $(CUDA_TRAINER_HEADERS)
	@mkdir -p build
	$(NVCC) $(NVCC_FLAGS) -o $@ $< $(NVCC_LDLIBS)

build/test_llama_debug_bf16: test/test_llama_debug.cu test/debug_checks.h test/llama_debug_state.h $(CUDA_TRAINER_HEADERS)
	@mkdir -p build
	$(NVCC) $(NVCC_FLAGS) -DENABLE_BF16 -o $@ $< $(NVCC_LDLIBS)

# generation (llmc/generate.h, the families' KV caches); data/bpe.h encodes the prompt
GENERATE_HEADERS := llmc/model_cuda_kv.cuh llmc/gpt2_cuda_kv.cuh llmc/llama_cuda_kv.cuh $(wildcard data/*.h)
generate_fp32: generate.cu $(CUDA_TRAINER_HEADERS) $(GENERATE_HEADERS)
	$(NVCC) $(NVCC_FLAGS) -o $@ $< $(NVCC_LDLIBS)

generate_bf16: generate.cu $(CUDA_TRAINER_HEADERS) $(GENERATE_HEADERS)
	$(NVCC) $(NVCC_FLAGS) -DENABLE_BF16 -o $@ $< $(NVCC_LDLIBS)
