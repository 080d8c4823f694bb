# emu.mk: the GPU programs built for the emulated GPU (llmc/emu/emu.h), included by the
# Makefile. The same train_gpt.cu, kernels and launchers as cuda.mk's, compiled by the host
# compiler after scripts/cu2cpp.py has rewritten CUDA's launch and __shared__ syntax:
#   train_gpt_fp32_emu, train_gpt_bf16_emu,         the trainers (the real ones' flags)
#   train_gpt_fp8_emu
#   generate_fp32_emu, generate_bf16_emu            sampling with a KV cache
#   build/emu/test_gpt2_debug_{fp32,bf16}           the PyTorch debug-state check
#   build/emu/test_llama_debug_{fp32,bf16}          the same for Llama 3 (test/llama_reference.py)
#   build/emu/test_offsets                          per-layer offsets at 8B-405B shapes (test_offsets.sh)
#   build/emu/cuda/<op>_{fp32,bf16}                 every dev/cuda program
# and the same under build/emu/asan/ with AddressSanitizer and UBSan, which report an
# out-of-bounds global or shared access as compute-sanitizer's memcheck would; the tests run
# the dev programs and four debug states so, two GPT-2 and two Llama (the rest unsanitised, for time), as they do
#   build/emu/test_emu_runtime, test_emu_ptx, test_emu_cublaslt, test_emu_nccl,
#   test_emu_semantics, test_emu_races, test_emu_fp8, test_emu_fp8_gemm the emulator's own tests;
#   build/emu/fp8_reference.bin                     NVIDIA's FP8 conversions for test_emu_fp8 and
#                                                   test_emu_fp8_gemm, written
#                                                   by test/fp8_reference.cpp built against the CUDA
#                                                   toolkit's own cuda_fp8.h (where there is one).
# and the race-check flavour under build/emu/race/ (the dev programs, test_emu_runtime,
# test_emu_races, the trainers as build/emu/race/train_gpt_{fp32,bf16}): the program's own code
# compiled with GCC's -fsanitize=thread instrumentation, linked without libtsan against the
# emulator, whose llmc/emu/race_tsan.cpp takes the calls; run with EMU_RACECHECK=1 it reports
# hazards as compute-sanitizer's racecheck would (llmc/emu/racecheck.cpp). ASan and this
# instrumentation do not combine, hence the separate flavour.
# `make emu-all` builds what test/test_emu.sh runs.

EMU_CXX ?= $(CXX)
EMU_SRC := build/emu/src
EMU_WARN := -Wall -Wno-unknown-pragmas -Wno-unused-function -Wno-unused-parameter -Wno-unused-variable
# -fno-strict-aliasing: device code type-puns through pointers (16-byte loads as int4, bf16 pairs
# as uint32_t), which nvcc allows and a host compiler could otherwise miscompile.
# -g1: line tables only, enough for the sanitizers' and gdb's file:line; full -g doubled the
# ASan builds' compile time (65 s against 29 s for dev/cuda/attention, 2026-11-28), and CI
# builds about 90 programs. Debug with EMU_DEBUG=-g.
EMU_DEBUG ?= -g1
EMU_FLAGS ?= -std=c++17 -O2 $(EMU_DEBUG) -march=native -fopenmp -fno-strict-aliasing $(EMU_WARN) -I llmc/emu/include -include llmc/emu/emu.h
# UBSan without pointer-overflow (a pointer sum that wraps the address space): that check alone
# took 30% of the ASan builds' compile time (dev/cuda/attention bf16: 37 s, 26 s without it; the
# ASan builds are about half of make emu-all's 1020 CPU-seconds, 2026-11-29). Used, a wrapped
# pointer reads or writes outside its allocation, which ASan reports (or the access faults); the
# int arithmetic that would wrap it is still checked (signed-integer-overflow), and
# test_int_widening checks the widening before it.
EMU_SAN_FLAGS := -O1 -fsanitize=address,undefined -fno-sanitize=pointer-overflow -fno-omit-frame-pointer \
                 -fno-sanitize-recover=undefined
# every load, store and __atomic builtin calls llmc/emu/race_tsan.cpp (function entries need not)
EMU_RACE_FLAGS := -fsanitize=thread --param=tsan-instrument-func-entry-exit=0
EMU_LDLIBS := -pthread -lrt -lm
# the emulated NCCL is always there; MPI as for the real trainers (cuda.mk's MPICXX)
EMU_MP_FLAGS := -DUSE_NCCL $(if $(MPICXX),-DUSE_MPI $(MPI_CFLAGS))
EMU_MP_LIBS := $(if $(MPICXX),$(MPI_LDLIBS))

EMU_LIB_SRCS := $(wildcard llmc/emu/*.cpp)
# the emulated build's configuration (the Makefile's config_stamp): compiler, flags, MPI found or not
CONFIG_EMU := $(call config_stamp,build/.config-emu,$(EMU_CXX) $(EMU_FLAGS) $(EMU_SAN_FLAGS) $(EMU_LDLIBS) $(EMU_MP_FLAGS) $(EMU_MP_LIBS))
EMU_LIB_HDRS := $(wildcard llmc/emu/*.h llmc/emu/include/*.h) $(CONFIG_EMU)
EMU_OBJS := $(patsubst llmc/emu/%.cpp,build/emu/obj/%.o,$(EMU_LIB_SRCS))
EMU_ASAN_OBJS := $(patsubst llmc/emu/%.cpp,build/emu/asan/obj/%.o,$(EMU_LIB_SRCS))

# every source a GPU program may include, rewritten into build/emu/src (only changed files
# are written, so the stamp's prerequisites decide what rebuilds)
EMU_CU_SOURCES := train_gpt.cu generate.cu $(wildcard llmc/*.h llmc/cpu/*.h llmc/cuda/*.cuh llmc/*.cuh dev/cuda/*.cu \
                  dev/cuda/*.cuh data/*.h test/*.cu test/*.h)
# Each program depends on the original files it includes (its .d file, written by the compiler
# for the rewritten copies and mapped back), and only waits for the rewrite (order-only), so
# a change to one header rebuilds the programs that include it, not all of them.
build/emu/src/.stamp: scripts/cu2cpp.py $(EMU_CU_SOURCES)
	@mkdir -p $(EMU_SRC)
	$(PYTHON) scripts/cu2cpp.py $(EMU_SRC)
	@touch $@
EMU_DEPS := scripts/cu2cpp.py $(EMU_LIB_HDRS) | build/emu/src/.stamp
-include $(wildcard build/emu/deps/*.d)

build/emu/obj/%.o: llmc/emu/%.cpp $(EMU_LIB_HDRS)
	@mkdir -p $(dir $@)
	$(EMU_CXX) $(EMU_FLAGS) -c -o $@ $<
build/emu/asan/obj/%.o: llmc/emu/%.cpp $(EMU_LIB_HDRS)
	@mkdir -p $(dir $@)
	$(EMU_CXX) $(EMU_FLAGS) $(EMU_SAN_FLAGS) -c -o $@ $<

# A program's dependency file is written under a .tmp name and renamed when whole: a make that
# reads build/emu/deps/*.d while another builds (test/run_tests.sh builds emu-all in the
# background while tests call make) sees the old file or the new one, never half of one.
EMU_DEP = build/emu/deps/$(subst /,_,$(1)).d
EMU_DEP_DONE = sed -i 's\#$(EMU_SRC)/\#\#g' $(EMU_DEP).tmp && mv $(EMU_DEP).tmp $(EMU_DEP)
# EMU_BUILD(output, rewritten source, extra flags, objects)
EMU_BUILD = @mkdir -p $(dir $(1)) build/emu/deps && echo "emu: $(1)" && \
	$(EMU_CXX) $(EMU_FLAGS) $(3) -MMD -MP -MT $(1) -MF $(EMU_DEP).tmp -x c++ $(2) -x none $(4) \
	    -o $(1) $(EMU_LDLIBS) && $(EMU_DEP_DONE)
# EMU_RACE_BUILD(output, rewritten source, extra flags, extra libraries): compiled with the
# instrumentation, then linked in a second step, without it, so that no libtsan comes in
EMU_RACE_BUILD = @mkdir -p $(dir $(1)) build/emu/deps && echo "emu: $(1)" && \
	$(EMU_CXX) $(EMU_FLAGS) $(EMU_RACE_FLAGS) $(3) -MMD -MP -MT $(1) -MF $(EMU_DEP).tmp \
	    -c -x c++ $(2) -o $(1).o && $(EMU_CXX) $(EMU_FLAGS) $(1).o $(EMU_OBJS) $(4) -o $(1) $(EMU_LDLIBS) && \
	rm -f $(1).o && $(EMU_DEP_DONE)

train_gpt_fp32_emu: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/train_gpt.cu,$(EMU_MP_FLAGS),$(EMU_OBJS) $(EMU_MP_LIBS))
train_gpt_bf16_emu: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/train_gpt.cu,-DENABLE_BF16 $(EMU_MP_FLAGS),$(EMU_OBJS) $(EMU_MP_LIBS))
train_gpt_fp8_emu: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/train_gpt.cu,-DENABLE_BF16 -DENABLE_FP8 $(EMU_MP_FLAGS),$(EMU_OBJS) $(EMU_MP_LIBS))
generate_fp32_emu: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/generate.cu,,$(EMU_OBJS))
generate_bf16_emu: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/generate.cu,-DENABLE_BF16,$(EMU_OBJS))

build/emu/test_gpt2_debug_fp32: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/test/test_gpt2_debug.cu,,$(EMU_OBJS))
build/emu/test_gpt2_debug_bf16: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/test/test_gpt2_debug.cu,-DENABLE_BF16,$(EMU_OBJS))
build/emu/asan/test_gpt2_debug_fp32: $(EMU_ASAN_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/test/test_gpt2_debug.cu,$(EMU_SAN_FLAGS),$(EMU_ASAN_OBJS))
build/emu/asan/test_gpt2_debug_bf16: $(EMU_ASAN_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/test/test_gpt2_debug.cu,-DENABLE_BF16 $(EMU_SAN_FLAGS),$(EMU_ASAN_OBJS))
build/emu/test_llama_debug_fp32: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/test/test_llama_debug.cu,,$(EMU_OBJS))
build/emu/test_llama_debug_bf16: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/test/test_llama_debug.cu,-DENABLE_BF16,$(EMU_OBJS))
build/emu/asan/test_llama_debug_fp32: $(EMU_ASAN_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/test/test_llama_debug.cu,$(EMU_SAN_FLAGS),$(EMU_ASAN_OBJS))
build/emu/asan/test_llama_debug_bf16: $(EMU_ASAN_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/test/test_llama_debug.cu,-DENABLE_BF16 $(EMU_SAN_FLAGS),$(EMU_ASAN_OBJS))

# the per-layer offsets of both families at 8B/70B/405B and GPT-3 175B shapes (test/test_offsets.sh)
build/emu/test_offsets: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/test/test_offsets.cu,,$(EMU_OBJS))

build/emu/cuda/%_fp32: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/dev/cuda/$*.cu,,$(EMU_OBJS))
build/emu/cuda/%_bf16: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/dev/cuda/$*.cu,-DENABLE_BF16,$(EMU_OBJS))
build/emu/asan/cuda/%_fp32: $(EMU_ASAN_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/dev/cuda/$*.cu,$(EMU_SAN_FLAGS),$(EMU_ASAN_OBJS))
build/emu/asan/cuda/%_bf16: $(EMU_ASAN_OBJS) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(EMU_SRC)/dev/cuda/$*.cu,-DENABLE_BF16 $(EMU_SAN_FLAGS),$(EMU_ASAN_OBJS))

build/emu/race/cuda/%_fp32: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_RACE_BUILD,$@,$(EMU_SRC)/dev/cuda/$*.cu,,)
build/emu/race/cuda/%_bf16: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_RACE_BUILD,$@,$(EMU_SRC)/dev/cuda/$*.cu,-DENABLE_BF16,)
build/emu/race/train_gpt_fp32: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_RACE_BUILD,$@,$(EMU_SRC)/train_gpt.cu,$(EMU_MP_FLAGS),$(EMU_MP_LIBS))
build/emu/race/train_gpt_bf16: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_RACE_BUILD,$@,$(EMU_SRC)/train_gpt.cu,-DENABLE_BF16 $(EMU_MP_FLAGS),$(EMU_MP_LIBS))

# the emulator's own tests: test_emu_*.cu go through the rewriter, test_emu_*.cpp do not
build/emu/test_emu_%: $(EMU_ASAN_OBJS) $(wildcard test/test_emu_*.cpp) $(EMU_DEPS)
	$(call EMU_BUILD,$@,$(firstword $(wildcard $(EMU_SRC)/test/test_emu_$*.cu test/test_emu_$*.cpp)),-I. $(EMU_SAN_FLAGS),$(EMU_ASAN_OBJS))
build/emu/race/test_emu_%: $(EMU_OBJS) $(EMU_DEPS)
	$(call EMU_RACE_BUILD,$@,$(EMU_SRC)/test/test_emu_$*.cu,-I.,)

# NVIDIA's FP8 conversions, the reference test_emu_fp8 compares the emulator's cuda_fp8.h to (and
# test_emu_fp8_gemm decodes its FP8 matmuls' inputs and rounds their outputs by):
# test/fp8_reference.cpp, compiled by the host compiler against the toolkit's cuda_fp8.h (beside
# nvcc, or in /usr/local/cuda), never the emulator's, writes them to a table. Without a toolkit
# there is no table, and test_emu_fp8 checks only the OFP8 specification's values
# (test_emu_fp8_gemm only the refusals).
FP8_CUDA_INCLUDE ?= $(patsubst %/cuda_fp8.h,%,$(firstword $(wildcard $(dir $(NVCC))../include/cuda_fp8.h \
                                                                      /usr/local/cuda/include/cuda_fp8.h)))
ifneq ($(FP8_CUDA_INCLUDE),)
build/emu/fp8_reference: test/fp8_reference.cpp test/fp8_table.h $(FP8_CUDA_INCLUDE)/cuda_fp8.hpp
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -Wall -I $(FP8_CUDA_INCLUDE) -o $@ $<
build/emu/fp8_reference.bin: build/emu/fp8_reference
	build/emu/fp8_reference $@
build/emu/test_emu_fp8 build/emu/test_emu_fp8_gemm: | build/emu/fp8_reference.bin
endif

EMU_DEV_BINS := $(foreach n,$(CUDA_DEV_NAMES),build/emu/cuda/$(n)_fp32 build/emu/cuda/$(n)_bf16)
EMU_DEV_ASAN_BINS := $(subst build/emu/,build/emu/asan/,$(EMU_DEV_BINS))
EMU_DEV_RACE_BINS := $(subst build/emu/,build/emu/race/,$(EMU_DEV_BINS))
EMU_TESTS := $(patsubst test/test_emu_%,build/emu/test_emu_%,$(basename $(wildcard test/test_emu_*.cu test/test_emu_*.cpp)))
# (not test_emu_fp8: its kernel shares nothing between threads, the race check has nothing to see)
EMU_RACE_TESTS := $(patsubst test/test_emu_%.cu,build/emu/race/test_emu_%,$(filter-out test/test_emu_fp8.cu,$(wildcard test/test_emu_*.cu)))

.PHONY: emu-all emu-trainers emu-dev emu-tests
emu-trainers: train_gpt_fp32_emu train_gpt_bf16_emu train_gpt_fp8_emu generate_fp32_emu generate_bf16_emu \
              build/emu/test_gpt2_debug_fp32 build/emu/test_gpt2_debug_bf16 \
              build/emu/asan/test_gpt2_debug_fp32 build/emu/asan/test_gpt2_debug_bf16
emu-trainers: build/emu/test_llama_debug_fp32 build/emu/test_llama_debug_bf16 \
              build/emu/asan/test_llama_debug_fp32 build/emu/asan/test_llama_debug_bf16
emu-dev: $(EMU_DEV_ASAN_BINS) $(EMU_DEV_RACE_BINS)
emu-tests: $(EMU_TESTS) $(EMU_RACE_TESTS)
emu-trainers: build/emu/race/train_gpt_fp32 build/emu/race/train_gpt_bf16
emu-all: emu-trainers emu-dev emu-tests
