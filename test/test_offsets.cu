// test_offsets.cu: where each layer's activations and parameter/gradient slices start, at the
// shapes where an int product wraps: Llama 3.1 8B, 70B and 405B at B=1, T=8192, and GPT-3
// 175B at B=1, T=2048. It checks the code both trainers run: the CPU's llama_layer_acts and
// gpt2_layer_acts, the GPU's llama_cuda_layer_acts and gpt2_cuda_layer_acts (at -r 0 and -r 2),
// and layer_slices over each family's parameter table (the gradients use the same slices).
//
// The expected offsets are worked out here in unsigned 64-bit arithmetic from the published
// shapes (Meta's params.json for Llama 3.1: dim, n_layers, n_heads, n_kv_heads = 8, the MLP's
// hidden size, vocabulary 128,256; the GPT-3 paper's Table 2.1 for 175B: 96 layers, d_model
// 12,288, 96 heads, context 2,048; GPT-2's vocabulary 50,257 padded to 50,304), not from the
// trainer's own plans; the plans only say how long each buffer is, and every slice must end
// inside its buffer. Nothing is allocated: each buffer gets a made-up base address 2^44 bytes
// from the next, never dereferenced, and a slice is judged by its distance from its base.
// Also: the planner's activation bytes (llmc/plan.h, ./plan) equal what the GPU plans allocate,
// at these shapes and at a small odd one (Llama and GPT-2 at -r 0, 1 and 2).
// Built for the emulated GPU (emu.mk: the GPU headers are CUDA); runs on the CPU in a second.
// Prints each failure and a summary; exits 1 if any check failed.
#include <cstdint>
#include <cstdio>
#include <string>

#include "../llmc/gpt2_cuda.cuh"   // defines: GPT2Cuda, gpt2_cuda_layer_acts, gpt2_cuda_activation_plan, ...
#include "../llmc/llama_cuda.cuh"  // defines: LlamaCuda, llama_cuda_layer_acts, llama_cuda_activation_plan, ...
#include "../llmc/plan.h"          // defines: plan_activation_bytes

typedef unsigned long long u64;

static int failures = 0, checks = 0;

// A made-up address for buffer i: 2^44 bytes apart, more than any buffer here takes (the
// largest, the CPU's 405B attention probabilities, is 4.3e12 bytes).
static void* fake_base(int i) { return reinterpret_cast<void*>((uintptr_t)(i + 1) << 44); }

static u64 distance(const void* p, const void* base) { return (u64)((uintptr_t)p - (uintptr_t)base); }

// p must lie `offset` elements of `elem` bytes past base, and the slice of `len` elements there
// must end inside the buffer of `buffer_len` elements.
static void expect_at(const std::string& what, const void* p, const void* base, u64 offset, u64 len, u64 buffer_len,
                      u64 elem) {
    checks++;
    const u64 got = distance(p, base);
    if (got != offset * elem || offset + len > buffer_len) {
        if (failures++ < 20)
            printf("FAIL %s: %llu bytes past its buffer's start, expected %llu (%llu elements of %llu bytes); slice "
                   "end %llu of %llu elements\n",
                   what.c_str(), got, offset * elem, offset, elem, offset + len, buffer_len);
    }
}

// The published shapes
struct LlamaShape {
    const char* desc;
    u64 L, C, NH, NKV, F, V;
};
static const LlamaShape LLAMAS[] = {
    {"llama3.1:8b", 32, 4096, 32, 8, 14336, 128256},
    {"llama3.1:70b", 80, 8192, 64, 8, 28672, 128256},
    {"llama3.1:405b", 126, 16384, 128, 8, 53248, 128256},
};
struct GptShape {
    const char* desc;
    u64 L, C, NH, V, maxT;
};
static const GptShape GPTS[] = {{"gpt3:c12288", 96, 12288, 96, 50257, 2048}};

static u64 pad128(u64 v) { return (v + 127) / 128 * 128; }

// ---------------------------------------------------------------------------------------
// Llama

static void check_llama(const LlamaShape& s, u64 B, u64 T) {
    LlamaConfig cfg{};
    if (!llama_config_from_descriptor(s.desc, &cfg)) {
        printf("FAIL %s: not a descriptor\n", s.desc);
        failures++;
        return;
    }
    const u64 L = s.L, C = s.C, F = s.F, N = B * T, hs = s.C / s.NH, QKV = (s.NH + 2 * s.NKV) * hs;
    const u64 Vp = pad128(s.V);
    const std::string at = std::string(s.desc) + " B=" + std::to_string(B) + " T=" + std::to_string(T);

    // the CPU: float activations; the buffers' lengths from llama_activation_sizes
    {
        Llama m;
        m.config = cfg;
        m.B = (int)B;
        m.T = (int)T;
        size_t sizes[LLAMA_NUM_ACTIVATIONS];
        llama_activation_sizes(cfg, (int)B, (int)T, sizes);
        float** fields = reinterpret_cast<float**>(&m.acts);
        for (int i = 0; i < LLAMA_NUM_ACTIVATIONS; i++) fields[i] = static_cast<float*>(fake_base(i));
        const LlamaActivations& a = m.acts;
        auto len = [&](const float* const& field) { return (u64)sizes[&field - (const float* const*)&a]; };
        for (u64 l = 0; l < L; l++) {
            const LlamaLayerActs v = llama_layer_acts(&m, (int)l);
            const std::string w = at + " cpu layer " + std::to_string(l) + " ";
            const u64 E = sizeof(float);
            if (l == 0) expect_at(w + "residual", v.residual, a.encoded, 0, N * C, len(a.encoded), E);
            else expect_at(w + "residual", v.residual, a.residual3, (l - 1) * N * C, N * C, len(a.residual3), E);
            expect_at(w + "rms1", v.rms1, a.rms1, l * N * C, N * C, len(a.rms1), E);
            expect_at(w + "rms1_rstd", v.rms1_rstd, a.rms1_rstd, l * N, N, len(a.rms1_rstd), E);
            expect_at(w + "qkv", v.qkv, a.qkv, l * N * QKV, N * QKV, len(a.qkv), E);
            expect_at(w + "atty", v.atty, a.atty, l * N * C, N * C, len(a.atty), E);
            expect_at(w + "att", v.att, a.att, l * B * s.NH * T * T, B * s.NH * T * T, len(a.att), E);
            expect_at(w + "residual2", v.residual2, a.residual2, l * N * C, N * C, len(a.residual2), E);
            expect_at(w + "rms2", v.rms2, a.rms2, l * N * C, N * C, len(a.rms2), E);
            expect_at(w + "rms2_rstd", v.rms2_rstd, a.rms2_rstd, l * N, N, len(a.rms2_rstd), E);
            expect_at(w + "fch", v.fch, a.fch, l * N * 2 * F, N * 2 * F, len(a.fch), E);
            expect_at(w + "fch_swiglu", v.fch_swiglu, a.fch_swiglu, l * N * F, N * F, len(a.fch_swiglu), E);
            expect_at(w + "residual3", v.residual3, a.residual3, l * N * C, N * C, len(a.residual3), E);
        }
    }
    // the GPU: floatX activations (float stats); the buffers' lengths from the activation plan
    {
        LlamaCuda m;
        m.config = cfg;
        m.B = (int)B;
        m.T = (int)T;
        CudaSlot slots[LLAMA_CUDA_NUM_ACTIVATIONS];
        llama_cuda_activation_plan(cfg, (int)B, (int)T, 0, &m.acts, slots);
        for (int i = 0; i < LLAMA_CUDA_NUM_ACTIVATIONS; i++) *slots[i].ptr = fake_base(i);
        const LlamaActivationsX& a = m.acts;
        auto len = [&](const void* field_value) {
            for (const CudaSlot& s : slots)
                if (*s.ptr == field_value) return (u64)s.count;
            return (u64)0;
        };
        const u64 X = sizeof(floatX), E = sizeof(float);
        for (u64 l = 0; l < L; l++) {
            const LlamaLayerActsX v = llama_cuda_layer_acts(&m, (int)l);
            const std::string w = at + " gpu layer " + std::to_string(l) + " ";
            if (l == 0) expect_at(w + "residual", v.residual, a.encoded, 0, N * C, len(a.encoded), X);
            else expect_at(w + "residual", v.residual, a.residual3, (l - 1) * N * C, N * C, len(a.residual3), X);
            expect_at(w + "rms1", v.rms1, a.rms1, l * N * C, N * C, len(a.rms1), X);
            expect_at(w + "rms1_rstd", v.rms1_rstd, a.rms1_rstd, l * N, N, len(a.rms1_rstd), E);
            expect_at(w + "qkv", v.qkv, a.qkv, l * N * QKV, N * QKV, len(a.qkv), X);
            expect_at(w + "atty", v.atty, a.atty, l * N * C, N * C, len(a.atty), X);
            expect_at(w + "att_lse", v.att_lse, a.att_lse, l * B * s.NH * T, B * s.NH * T, len(a.att_lse), E);
            expect_at(w + "residual2", v.residual2, a.residual2, l * N * C, N * C, len(a.residual2), X);
            expect_at(w + "rms2", v.rms2, a.rms2, l * N * C, N * C, len(a.rms2), X);
            expect_at(w + "rms2_rstd", v.rms2_rstd, a.rms2_rstd, l * N, N, len(a.rms2_rstd), E);
            expect_at(w + "fch", v.fch, a.fch, l * N * 2 * F, N * 2 * F, len(a.fch), X);
            expect_at(w + "fch_swiglu", v.fch_swiglu, a.fch_swiglu, l * N * F, N * F, len(a.fch_swiglu), X);
            expect_at(w + "residual3", v.residual3, a.residual3, l * N * C, N * C, len(a.residual3), X);
        }
    }
    // parameters and gradients: the table's rows one after the other, in checkpoint order
    {
        ParamTensor table[LLAMA_NUM_PARAM_TENSORS];
        const u64 total = llama_param_table(cfg, table);
        const u64 per_layer[LLAMA_NUM_LAYER_TENSORS] = {C, QKV * C, C * C, C, 2 * F * C, C * F};
        const u64 expected_total = Vp * C + L * (C + QKV * C + C * C + C + 2 * F * C + C * F) + C + Vp * C;
        checks++;
        if (total != expected_total) {
            printf("FAIL %s: the table holds %llu parameters, expected %llu\n", at.c_str(), total, expected_total);
            failures++;
        }
        float* base = static_cast<float*>(fake_base(0));
        for (u64 l = 0; l < L; l++) {
            float* slices[MAX_PARAM_TENSORS];
            layer_slices(base, llama_layout(table, (int)L), (int)l, slices);
            u64 row_start = Vp * C;  // after wte
            for (int i = 0; i < LLAMA_NUM_LAYER_TENSORS; i++) {
                expect_at(at + " parameter slice " + table[LLAMA_FIRST_LAYER_TENSOR + i].name + " of layer " +
                              std::to_string(l),
                          slices[i], base, row_start + l * per_layer[i], per_layer[i], expected_total, sizeof(float));
                row_start += L * per_layer[i];
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// GPT-2/GPT-3

static void check_gpt(const GptShape& s, u64 B, u64 T) {
    GPT2Config cfg{};
    if (!gpt2_config_from_descriptor(s.desc, &cfg)) {
        printf("FAIL %s: not a descriptor\n", s.desc);
        failures++;
        return;
    }
    const u64 L = s.L, C = s.C, N = B * T, Vp = pad128(s.V);
    const std::string at = std::string(s.desc) + " B=" + std::to_string(B) + " T=" + std::to_string(T);
    {
        GPT2 m;
        m.config = cfg;
        m.B = (int)B;
        m.T = (int)T;
        size_t sizes[GPT2_NUM_ACTIVATIONS];
        gpt2_activation_sizes(cfg, (int)B, (int)T, sizes);
        float** fields = reinterpret_cast<float**>(&m.acts);
        for (int i = 0; i < GPT2_NUM_ACTIVATIONS; i++) fields[i] = static_cast<float*>(fake_base(i));
        const Activations& a = m.acts;
        auto len = [&](const float* const& field) { return (u64)sizes[&field - (const float* const*)&a]; };
        const u64 E = sizeof(float);
        for (u64 l = 0; l < L; l++) {
            const GPT2LayerActs v = gpt2_layer_acts(&m, (int)l);
            const std::string w = at + " cpu layer " + std::to_string(l) + " ";
            if (l == 0) expect_at(w + "residual", v.residual, a.encoded, 0, N * C, len(a.encoded), E);
            else expect_at(w + "residual", v.residual, a.residual3, (l - 1) * N * C, N * C, len(a.residual3), E);
            expect_at(w + "ln1", v.ln1, a.ln1, l * N * C, N * C, len(a.ln1), E);
            expect_at(w + "ln1_mean", v.ln1_mean, a.ln1_mean, l * N, N, len(a.ln1_mean), E);
            expect_at(w + "ln1_rstd", v.ln1_rstd, a.ln1_rstd, l * N, N, len(a.ln1_rstd), E);
            expect_at(w + "qkv", v.qkv, a.qkv, l * N * 3 * C, N * 3 * C, len(a.qkv), E);
            expect_at(w + "atty", v.atty, a.atty, l * N * C, N * C, len(a.atty), E);
            expect_at(w + "att", v.att, a.att, l * B * s.NH * T * T, B * s.NH * T * T, len(a.att), E);
            expect_at(w + "residual2", v.residual2, a.residual2, l * N * C, N * C, len(a.residual2), E);
            expect_at(w + "ln2", v.ln2, a.ln2, l * N * C, N * C, len(a.ln2), E);
            expect_at(w + "ln2_mean", v.ln2_mean, a.ln2_mean, l * N, N, len(a.ln2_mean), E);
            expect_at(w + "ln2_rstd", v.ln2_rstd, a.ln2_rstd, l * N, N, len(a.ln2_rstd), E);
            expect_at(w + "fch", v.fch, a.fch, l * N * 4 * C, N * 4 * C, len(a.fch), E);
            expect_at(w + "fch_gelu", v.fch_gelu, a.fch_gelu, l * N * 4 * C, N * 4 * C, len(a.fch_gelu), E);
            expect_at(w + "residual3", v.residual3, a.residual3, l * N * C, N * C, len(a.residual3), E);
        }
    }
    // the GPU at recompute 0 (every layer keeps its ln1, ln2, GELU output) and 2 (one shared
    // buffer each)
    for (int recompute : {0, 2}) {
        GPT2Cuda m;
        m.config = cfg;
        m.B = (int)B;
        m.T = (int)T;
        m.recompute = recompute;
        CudaSlot slots[GPT2_CUDA_NUM_ACTIVATIONS];
        gpt2_cuda_activation_plan(cfg, (int)B, (int)T, recompute, &m.acts, slots);
        for (int i = 0; i < GPT2_CUDA_NUM_ACTIVATIONS; i++) *slots[i].ptr = fake_base(i);
        const GPUActivations& a = m.acts;
        auto len = [&](const void* field_value) {
            for (const CudaSlot& s : slots)
                if (*s.ptr == field_value) return (u64)s.count;
            return (u64)0;
        };
        const u64 X = sizeof(floatX), E = sizeof(float);
        const u64 ln_layer = recompute >= 2 ? 0 : 1, gelu_layer = recompute >= 1 ? 0 : 1;
        for (u64 l = 0; l < L; l++) {
            const GPT2LayerActsX v = gpt2_cuda_layer_acts(&m, (int)l);
            const std::string w = at + " gpu -r " + std::to_string(recompute) + " layer " + std::to_string(l) + " ";
            if (l == 0) expect_at(w + "residual", v.residual, a.encoded, 0, N * C, len(a.encoded), X);
            else expect_at(w + "residual", v.residual, a.residual3, (l - 1) * N * C, N * C, len(a.residual3), X);
            expect_at(w + "ln1", v.ln1, a.ln1, ln_layer * l * N * C, N * C, len(a.ln1), X);
            expect_at(w + "ln1_mean", v.ln1_mean, a.ln1_mean, l * N, N, len(a.ln1_mean), E);
            expect_at(w + "ln1_rstd", v.ln1_rstd, a.ln1_rstd, l * N, N, len(a.ln1_rstd), E);
            expect_at(w + "qkv", v.qkv, a.qkv, l * N * 3 * C, N * 3 * C, len(a.qkv), X);
            expect_at(w + "atty", v.atty, a.atty, l * N * C, N * C, len(a.atty), X);
            expect_at(w + "att_lse", v.att_lse, a.att_lse, l * B * s.NH * T, B * s.NH * T, len(a.att_lse), E);
            expect_at(w + "residual2", v.residual2, a.residual2, l * N * C, N * C, len(a.residual2), X);
            expect_at(w + "ln2", v.ln2, a.ln2, ln_layer * l * N * C, N * C, len(a.ln2), X);
            expect_at(w + "ln2_mean", v.ln2_mean, a.ln2_mean, l * N, N, len(a.ln2_mean), E);
            expect_at(w + "ln2_rstd", v.ln2_rstd, a.ln2_rstd, l * N, N, len(a.ln2_rstd), E);
            expect_at(w + "fch", v.fch, a.fch, l * N * 4 * C, N * 4 * C, len(a.fch), X);
            expect_at(w + "fch_gelu", v.fch_gelu, a.fch_gelu, gelu_layer * l * N * 4 * C, N * 4 * C, len(a.fch_gelu),
                      X);
            expect_at(w + "residual3", v.residual3, a.residual3, l * N * C, N * C, len(a.residual3), X);
        }
    }
    {
        ParamTensor table[NUM_PARAM_TENSORS];
        const u64 total = gpt2_param_table(cfg, table);
        // wte, wpe; per layer ln1w ln1b qkvw qkvb attprojw attprojb ln2w ln2b fcw fcb fcprojw fcprojb; lnfw lnfb
        const u64 per_layer[NUM_LAYER_TENSORS] = {C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C};
        u64 layer_sum = 0;
        for (u64 n : per_layer) layer_sum += n;
        const u64 expected_total = Vp * C + s.maxT * C + L * layer_sum + 2 * C;
        checks++;
        if (total != expected_total) {
            printf("FAIL %s: the table holds %llu parameters, expected %llu\n", at.c_str(), total, expected_total);
            failures++;
        }
        float* base = static_cast<float*>(fake_base(0));
        for (u64 l = 0; l < L; l++) {
            float* slices[MAX_PARAM_TENSORS];
            layer_slices(base, gpt2_layout(table, (int)L), (int)l, slices);
            u64 row_start = Vp * C + s.maxT * C;  // after wte, wpe
            for (int i = 0; i < NUM_LAYER_TENSORS; i++) {
                expect_at(at + " parameter slice " + table[2 + i].name + " of layer " + std::to_string(l), slices[i],
                          base, row_start + l * per_layer[i], per_layer[i], expected_total, sizeof(float));
                row_start += L * per_layer[i];
            }
        }
    }
}

// ./plan's activation bytes (llmc/plan.h, its own arithmetic) against the GPU plans' own sums.
static void check_plan_bytes(const char* desc, int B, int T) {
    ModelConfig c;
    if (!model_config_from_descriptor(desc, &c)) {
        printf("FAIL %s: not a descriptor\n", desc);
        failures++;
        return;
    }
    const bool llama = c.family == FAMILY_LLAMA3;
    // in_cast: train_gpt_fp8's activation made in its casts, its output one layer deep
    for (int in_cast = 0; in_cast <= 1; in_cast++)
        for (int recompute = 0; recompute <= 2; recompute++) {
            const double want = llama ? (double)llama_cuda_activation_bytes(c.llama, B, T, recompute, 1, false, -1, in_cast)
                                      : (double)gpt2_cuda_activation_bytes(c.gpt2, B, T, recompute, 1, false, -1, in_cast);
            PlanActivations a;
            a.act_in_cast = in_cast == 1;
            const double got = plan_activation_bytes(c, B, T, recompute, sizeof(floatX), a);
            checks++;
            if (got != want) {
                printf("FAIL %s B=%d T=%d -r %d%s: plan.h counts %.0f activation bytes, the GPU plan allocates %.0f\n",
                       desc, B, T, recompute, in_cast ? " (activation in the casts)" : "", got, want);
                failures++;
            }
        }
}

int main() {
    for (const LlamaShape& s : LLAMAS) check_llama(s, 1, 8192);
    for (const GptShape& s : GPTS) check_gpt(s, 1, 2048);
    for (const LlamaShape& s : LLAMAS) check_plan_bytes(s.desc, 1, 8192);
    for (const GptShape& s : GPTS) check_plan_bytes(s.desc, 1, 2048);
    check_plan_bytes("llama3:l4c256h8kv2f704", 3, 77);
    check_plan_bytes("gpt2:l4c256", 3, 77);
    printf("%d of %d offset checks failed\n", failures, checks);
    return failures == 0 ? 0 : 1;
}
