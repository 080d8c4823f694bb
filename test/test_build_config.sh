#!/usr/bin/env bash
# The build follows its configuration: a program built without Open MPI (or NCCL, or for
# another GPU, or with other flags) is rebuilt once the configuration changes, not kept because
# its sources are older (the quickstart builds train_gpt_cpu before the test command installs
# Open MPI; the Makefiles' config_stamp). In a copy of the tree, with make's question mode
# (-q: exit 1 when something must be rebuilt) on binaries made to look up to date:
#   train_gpt_cpu built with NO_MPI=1 is out of date once MPI is found (when mpicxx is here);
#   train_gpt_bf16 built with NO_NCCL=1 is out of date once NCCL is found (when nccl.h is);
#   both for other flags (CXXFLAGS, CUDA_ARCH_FLAGS); train_gpt_bf16 compiled for the compile
#   check (CUDA_COMPILE_CHECK=1) once a normal build asks; the emulated trainers for another EMU_FLAGS;
#   and an unchanged configuration leaves them up to date.
set -u
cd "$(dirname "$0")/.."
out=test/out/build_config
rm -rf "$out"; mkdir -p "$out/tree"
fail() { echo "FAIL: $*"; exit 1; }
git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$out/tree" 2> /dev/null
cd "$out/tree"

# built(TARGET, MAKE-ARGS...): make writes the stamp for that configuration, then the target is
# made to look freshly built (newer than every source and the stamp)
built() {
    local target=$1; shift
    make -q "$target" "$@" > /dev/null 2>&1
    sleep 1
    mkdir -p "$(dirname "$target")"
    touch "$target"
}
up_to_date() { make -q "$@" > /dev/null 2>&1; }

built train_gpt_cpu NO_MPI=1
up_to_date train_gpt_cpu NO_MPI=1 || fail "train_gpt_cpu rebuilt with an unchanged configuration"
echo "ok   an unchanged configuration rebuilds nothing"
if command -v mpicxx > /dev/null; then
    up_to_date train_gpt_cpu && fail "train_gpt_cpu built without MPI is kept once mpicxx is found"
    echo "ok   train_gpt_cpu built without MPI is rebuilt once Open MPI is found"
else
    echo "skip no mpicxx here: the MPI case is not checked"
fi
built train_gpt_cpu
up_to_date train_gpt_cpu CXXFLAGS=-O1 && fail "train_gpt_cpu is kept under other CXXFLAGS"
echo "ok   other CXXFLAGS rebuild train_gpt_cpu"

built train_gpt_bf16 NO_NCCL=1
up_to_date train_gpt_bf16 NO_NCCL=1 || fail "train_gpt_bf16 rebuilt with an unchanged configuration"
nvcc_dir=$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")
if [ -f "$nvcc_dir/../include/nccl.h" ] || [ -f /usr/include/nccl.h ]; then  # where cuda.mk looks
    up_to_date train_gpt_bf16 && fail "train_gpt_bf16 built without NCCL is kept once nccl.h is found"
    echo "ok   train_gpt_bf16 built without NCCL is rebuilt once NCCL is found"
else
    echo "skip no nccl.h here: the NCCL case is not checked"
fi
built train_gpt_bf16
up_to_date train_gpt_bf16 CUDA_ARCH_FLAGS="-gencode arch=compute_80,code=sm_80" &&
    fail "train_gpt_bf16 is kept for another GPU architecture"
echo "ok   another GPU architecture rebuilds train_gpt_bf16"
# CI's compile check (scripts/test.sh without a GPU) compiles the device code for compiling speed:
# a build with the full optimization must not keep its binary
built train_gpt_bf16 CUDA_COMPILE_CHECK=1
up_to_date train_gpt_bf16 CUDA_COMPILE_CHECK=1 || fail "train_gpt_bf16 rebuilt with an unchanged CUDA_COMPILE_CHECK=1"
check_stamp=$(cat build/.config-cuda)
make -q train_gpt_bf16 > /dev/null 2>&1  # rewrites the stamp for a normal build
if [ "$check_stamp" != "$(cat build/.config-cuda)" ]; then  # cuda.mk found nvcc's -Ofc
    up_to_date train_gpt_bf16 && fail "train_gpt_bf16 compiled for the compile check is kept by a normal build"
    echo "ok   a normal build rebuilds what the compile check (CUDA_COMPILE_CHECK=1) compiled"
else
    echo "skip nvcc without -Ofc: the compile check builds as a normal build does"
fi
# CUDA_COMPILE_CHECK=auto (scripts/test.sh's) is the compile check exactly where no GPU is found
built train_gpt_bf16 CUDA_COMPILE_CHECK=1
if nvidia-smi -L > /dev/null 2>&1; then
    up_to_date train_gpt_bf16 CUDA_COMPILE_CHECK=auto && fail "CUDA_COMPILE_CHECK=auto kept the compile check's binary on a GPU machine"
    echo "ok   CUDA_COMPILE_CHECK=auto builds normally where a GPU is found"
else
    up_to_date train_gpt_bf16 CUDA_COMPILE_CHECK=auto || fail "CUDA_COMPILE_CHECK=auto is not the compile check without a GPU"
    echo "ok   CUDA_COMPILE_CHECK=auto is the compile check where no GPU is found"
fi

built train_gpt_bf16_emu
up_to_date train_gpt_bf16_emu EMU_FLAGS=-O0 && fail "train_gpt_bf16_emu is kept under other EMU_FLAGS"
echo "ok   other EMU_FLAGS rebuild the emulated trainers"
