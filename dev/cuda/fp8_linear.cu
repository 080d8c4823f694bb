// fp8_linear.cu: llmc/cuda/fp8_linear.cuh, the FP8 linear layer, against a CPU reference that
// runs the same recipe on its own: each tensor's scale from the amaxes it measured itself (delayed:
// the max of the steps before, 448 or 57344 over it, 1 at first; current: the tensor's own amax),
// each input quantized by the OCP spec's rounding (fp8_spec.cuh: the fp32 product x * scale to the
// nearest number, ties to even, saturated), decoded, multiplied in double, the two scale_inv (fp32,
// as the GPU holds them) applied after. Then, per step of three (inputs of growing size, so the
// delayed scales move), bf16 build:
//   forward   out (and pre_gelu, with GELU; out += with accumulate, Llama's residual projections)
//             of one linear layer against the reference
//   backward  dinp (+= when asked; times gelu'(pre_gelu) with GELU), dweight (+=), dbias (+=)
//   state     after the step, each amax = max |x| of its tensor exactly; after the update, each
//             scale = the reference's exactly; the other layer's tensors untouched
// for shapes whose leading dimensions are multiples of 16 (FP8's TN GEMMs), with and without bias,
// GELU and dinp accumulation, both recipes. The fp32 build has no FP8 layer: it says SKIP.
// Tolerances: the GEMM inputs are the same bits on both sides (the check of the state makes sure
// the scales are), so what is left is the GPU's fp32 (Hopper: narrower) sums and the bf16 rounding
// of the outputs: rtol 4e-3 and atol 2e-3 max|ref| as fp8.cu's GEMMs; dinp through GELU is rounded
// twice (the GEMM's output, then the product), rtol 8e-3. GELU runs as its own kernel on the bf16
// pre_gelu, so out is checked against GELU of the pre_gelu the GPU stored: against GELU of the
// reference's, a pre_gelu one bf16 ulp away (within tol) came through GELU's slope on top of out's
// rounding, and the H200 failed that by a bf16 ulp on 1-3 of 16,384 elements (2026-11-28).
// Each check was seen to fail (--quick on the emulated GPU, exit 1) with one slip planted at a
// time in fp8_linear.cuh: see the commit that added this file.
#include "dev_common.cuh"
#include "fp8_spec.cuh"  // defines: Fp8Spec, spec_positive, spec_quantize, SpecOf
#ifdef ENABLE_BF16
#include "../../llmc/cpu/gelu.h"           // defines: gelu_forward, gelu_backward (CPU)
#include "../../llmc/cpu/swiglu.h"         // defines: swiglu_backward (CPU)
#include "../../llmc/cuda/fp8_linear.cuh"  // defines: Fp8Linears, fp8_linear_forward, fp8_linear_backward, ...

// ---------------------------------------------------------------------------------------
// the recipe on the host

struct HostScale {
    float fp8_max;
    bool delayed;
    float scale = 1.0f;
    std::vector<float> history;  // delayed: every amax so far (fewer than 1024 steps here: all in the window)
    float amax = 0.0f;           // this step's
};

// the scale a tensor is cast with this step: delayed, the one chosen after the last step;
// current, from the tensor itself
static float host_scale_for(HostScale& h, const std::vector<float>& x) {
    float m = 0.0f;
    for (float v : x) m = std::max(m, std::fabs(v));
    h.amax = std::max(h.amax, m);
    if (!h.delayed && m > 0.0f) h.scale = h.fp8_max / m;
    return h.scale;
}

// after the step: delayed, the history's max gives the next scale (fp8.cuh: margin 0, a max of 0
// keeps the scale); the next step's amax starts from 0 either way
static void host_update(HostScale& h) {
    if (h.delayed) {
        h.history.push_back(h.amax);
        float m = 0.0f;
        for (float a : h.history) m = std::max(m, a);
        if (m > 0.0f) h.scale = h.fp8_max / m;
    }
    h.amax = 0.0f;
}

// x quantized with scale, as the values its fp8 codes decode to
template <typename T>
static std::vector<double> host_quantize(const std::vector<float>& x, float scale) {
    const Fp8Spec& f = SpecOf<T>::get();
    const std::vector<double> pos = spec_positive(f);
    std::vector<double> q(x.size());
    for (size_t i = 0; i < x.size(); i++) q[i] = spec_decode(f, spec_quantize(pos, x[i] * scale));
    return q;
}

static std::vector<float> rounded(std::vector<float> v) {
    round_to_floatX(v);
    return v;
}

// ---------------------------------------------------------------------------------------
// one layer over three steps

struct LinearCase {
    int BT, C, OC;
    bool bias, gelu, accumulate_dinp;
    bool accumulate_out = false;  // the forward adds into what out holds (fp8_linear_forward's accumulate)
    // dout goes back through the activation after the layer first, in the cast (train_gpt_fp8's GPT-2
    // fc: GELU, Llama gate/up: SwiGLU, dout then half as wide as the layer's output)
    ActKind dout_act = ACT_NONE;
    // the layer's input is an activation made in its casts (the projection after GPT-2's GELU,
    // Llama's SwiGLU: its input then C wide, the pre-activation C or 2C)
    ActKind inp_act = ACT_NONE;
    // the trainer's -fp8kt 1 -fp8kw 1: the input kept transposed from the forward for the backward,
    // the weight cast once a step (W and W^T) for both
    bool keep = false;
};

static void run_case(const CudaContext& ctx, const LinearCase& lc, Fp8Recipe recipe) {
    const int BT = lc.BT, C = lc.C, OC = lc.OC;
    const size_t n_inp = (size_t)BT * C, n_w = (size_t)OC * C, n_out = (size_t)BT * OC;
    const bool delayed = recipe == FP8_RECIPE_DELAYED;
    char name[160];
    snprintf(name, sizeof(name), "BT=%d C=%d OC=%d%s%s%s%s%s%s%s %s", BT, C, OC, lc.bias ? " bias" : "",
             lc.gelu ? " gelu" : "",
             lc.dout_act == ACT_GELU ? " dout-through-gelu" : (lc.dout_act == ACT_SWIGLU ? " dout-through-swiglu" : ""),
             lc.inp_act == ACT_GELU ? " inp=gelu(pre)" : (lc.inp_act == ACT_SWIGLU ? " inp=swiglu(pre)" : ""),
             lc.accumulate_dinp ? " dinp+=" : "",
             lc.accumulate_out ? " out+=" : "", lc.keep ? " kept" : "", delayed ? "delayed" : "current");
    printf("-- fp8_linear %s\n", name);
    // two linears; the one under test is the second, so that tensors 2, 3 (E4M3) and 1 (E5M2) move
    Fp8Linears set;
    fp8_linears_init(&set, 2, recipe, std::max(n_inp, n_out), n_w);
    const Fp8Linear layer = fp8_linear(set, 1);
    if (lc.keep) {
        const size_t inputs[2] = {n_inp, n_inp}, weights[2] = {2 * n_w, 2 * n_w};
        fp8_linears_keep_inputs(&set, inputs);
        fp8_linears_keep_weights(&set, weights);
    }
    HostScale hi{448.0f, delayed}, hw{448.0f, delayed}, hg{57344.0f, delayed};

    floatX *d_inp, *d_w, *d_bias, *d_out, *d_pre, *d_dout, *d_dinp, *d_dw, *d_db, *d_pre_bwd;
    for (floatX** p : {&d_inp, &d_pre_bwd, &d_dinp}) CHECK_CUDA(cudaMalloc(p, n_inp * sizeof(floatX)));
    floatX *d_pre_out, *d_pre_in;  // the activation's input after the layer (dout_act), before it (inp_act)
    CHECK_CUDA(cudaMalloc(&d_pre_in, 2 * n_inp * sizeof(floatX)));
    for (floatX** p : {&d_out, &d_pre, &d_dout, &d_pre_out}) CHECK_CUDA(cudaMalloc(p, n_out * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_w, n_w * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_dw, n_w * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_bias, OC * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_db, OC * sizeof(floatX)));
    const DevTol tol = {4e-3, 2e-3}, tol_gelu = {8e-3, 2e-3};

    for (int step = 0; step < 3; step++) {
        DevRng rng(100 * step + BT + 7 * C + 13 * OC);
        const float grow = (float)(1 << (2 * step));  // amaxes 1x, 4x, 16x: the delayed scale lags one step
        const std::vector<float> w = rounded(rand_vec(rng, n_w, 0.05f));
        // the input: random, or (inp_act) the activation of a random pre-activation, in bf16 as
        // gelu_forward and swiglu_forward write it (the CPU reference's, which the GPU's match
        // within a rounding)
        const std::vector<float> pre_in = rounded(rand_vec(rng, 2 * n_inp, 2.0f * grow));
        std::vector<float> inp = rounded(rand_vec(rng, n_inp, 2.0f * grow));
        if (lc.inp_act == ACT_GELU) gelu_forward(inp.data(), pre_in.data(), n_inp);
        if (lc.inp_act == ACT_SWIGLU) swiglu_forward(inp.data(), pre_in.data(), BT, C);
        inp = rounded(inp);
        const std::vector<float> bias = rounded(rand_vec(rng, OC, 0.1f));
        const size_t n_din = lc.dout_act == ACT_SWIGLU ? n_out / 2 : n_out;  // the gradient given
        const std::vector<float> dout_in = rounded(rand_vec(rng, n_din, 1e-3f * grow)), pre_out = rounded(rand_vec(rng, n_out, 2.0f));
        // the layer's output gradient: dout_in, or what the activation's backward makes of it, in
        // bf16 as gelu_backward and swiglu_backward write it (the CPU's accumulate into zeros)
        std::vector<float> dout = dout_in;
        if (lc.dout_act != ACT_NONE) {
            dout.assign(n_out, 0.0f);
            if (lc.dout_act == ACT_GELU) gelu_backward(dout.data(), pre_out.data(), dout_in.data(), n_out);
            else swiglu_backward(dout.data(), pre_out.data(), dout_in.data(), BT, OC / 2);
            dout = rounded(dout);
        }
        const std::vector<float> pre_bwd = rounded(rand_vec(rng, n_inp, 2.0f));
        const std::vector<float> dinp0 = rounded(rand_vec(rng, n_inp, 1e-3f)), dw0 = rounded(rand_vec(rng, n_w, 1e-2f));
        const std::vector<float> db0 = rounded(rand_vec(rng, OC, 1e-2f));
        const std::vector<float> out0 = rounded(rand_vec(rng, n_out, 1.0f));  // a residual stream (accumulate_out)
        dev_upload_into(d_inp, inp);
        dev_upload_into(d_w, w);
        dev_upload_into(d_bias, bias);
        dev_upload_into(d_dout, dout_in);
        dev_upload_into(d_pre_out, pre_out);
        dev_upload_into(d_pre_in, pre_in);
        const floatX* inp_arg = lc.inp_act == ACT_NONE ? d_inp : nullptr;  // made in the casts: not read
        const Act inp_act{lc.inp_act, d_pre_in};
        dev_upload_into(d_pre_bwd, pre_bwd);
        dev_upload_into(d_dinp, dinp0);
        dev_upload_into(d_dw, dw0);
        dev_upload_into(d_db, db0);
        dev_upload_into(d_out, out0);

        fp8_linears_forget_weights(set);  // a new step's weights (kept: cast by the forward)
        fp8_linear_forward(ctx, layer, d_out, lc.gelu ? d_pre : nullptr, inp_arg, d_w, lc.bias ? d_bias : nullptr, BT, C,
                           OC, lc.accumulate_out, inp_act);
        fp8_linear_backward(ctx, layer, d_dinp, d_dw, lc.bias ? d_db : nullptr, d_dout, inp_arg, d_w, BT, C, OC,
                            lc.accumulate_dinp, lc.gelu ? d_pre_bwd : nullptr, Act{lc.dout_act, d_pre_out}, inp_act);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));

        // the reference: the scales, the quantized inputs, the products
        const float si = host_scale_for(hi, inp), sw = host_scale_for(hw, w), sg = host_scale_for(hg, dout);
        const double inv_i = 1.0f / si, inv_w = 1.0f / sw, inv_g = 1.0f / sg;  // fp32, as the GPU's scale_inv
        const std::vector<double> qi = host_quantize<__nv_fp8_e4m3>(inp, si), qw = host_quantize<__nv_fp8_e4m3>(w, sw);
        const std::vector<double> qg = host_quantize<__nv_fp8_e5m2>(dout, sg);
        std::vector<float> out_ref(n_out), dinp_ref(n_inp), dw_ref(n_w), db_ref(OC);
#pragma omp parallel for
        for (int r = 0; r < BT; r++)
            for (int o = 0; o < OC; o++) {
                double acc = 0.0;
                for (int c = 0; c < C; c++) acc += qi[(size_t)r * C + c] * qw[(size_t)o * C + c];
                out_ref[(size_t)r * OC + o] = (float)(inv_i * inv_w * acc + (lc.bias ? bias[o] : 0.0) +
                                                      (lc.accumulate_out ? out0[(size_t)r * OC + o] : 0.0));
            }
#pragma omp parallel for
        for (int r = 0; r < BT; r++)
            for (int c = 0; c < C; c++) {
                double acc = 0.0;
                for (int o = 0; o < OC; o++) acc += qg[(size_t)r * OC + o] * qw[(size_t)o * C + c];
                dinp_ref[(size_t)r * C + c] = (float)(inv_g * inv_w * acc + (lc.accumulate_dinp ? dinp0[(size_t)r * C + c] : 0.0));
            }
#pragma omp parallel for
        for (int o = 0; o < OC; o++)
            for (int c = 0; c < C; c++) {
                double acc = 0.0;
                for (int r = 0; r < BT; r++) acc += qg[(size_t)r * OC + o] * qi[(size_t)r * C + c];
                dw_ref[(size_t)o * C + c] = (float)(dw0[(size_t)o * C + c] + inv_g * inv_i * acc);
            }
        for (int o = 0; o < OC; o++) {
            double acc = db0[o];
            for (int r = 0; r < BT; r++) acc += dout[(size_t)r * OC + o];
            db_ref[o] = (float)acc;
        }
        char what[512];
        snprintf(what, sizeof(what), "%s step %d", name, step);
        std::string w_(what);
        if (lc.gelu) {
            dev_check("fp8_linear", (w_ + " pre_gelu").c_str(), dev_download(d_pre, n_out), out_ref, tol);
            // out against GELU of the pre_gelu the GPU stored (the line above checked that one)
            std::vector<float> g(n_out);
            gelu_forward(g.data(), dev_download(d_pre, n_out).data(), n_out);
            dev_check("fp8_linear", (w_ + " out = gelu(pre_gelu)").c_str(), dev_download(d_out, n_out), g, tol);
            // dinp = bf16(dout W) * gelu'(pre_gelu): the CPU backward accumulates into zeros
            std::vector<float> prod = rounded(dinp_ref), dg(n_inp, 0.0f);
            gelu_backward(dg.data(), pre_bwd.data(), prod.data(), n_inp);
            dev_check("fp8_linear", (w_ + " dinp (through gelu)").c_str(), dev_download(d_dinp, n_inp), dg, tol_gelu);
        } else {
            dev_check("fp8_linear", (w_ + (lc.accumulate_out ? " out +=" : " out")).c_str(), dev_download(d_out, n_out),
                      out_ref, tol);
            dev_check("fp8_linear", (w_ + (lc.accumulate_dinp ? " dinp +=" : " dinp")).c_str(),
                      dev_download(d_dinp, n_inp), dinp_ref, tol);
        }
        dev_check("fp8_linear", (w_ + " dweight +=").c_str(), dev_download(d_dw, n_w), dw_ref, tol);
        if (lc.bias) dev_check("fp8_linear", (w_ + " dbias +=").c_str(), dev_download(d_db, OC), db_ref, tol);

        // the state: this step's amaxes, then (delayed) the scales the update chose
        const std::vector<float> a4 = dev_download_f32(set.e4m3.amax, 4), a5 = dev_download_f32(set.e5m2.amax, 2);
        // (through the GELU, the GPU's tanhf may put dout's largest value a bf16 rounding from the CPU's)
        const bool dout_amax_ok = lc.dout_act != ACT_NONE ? std::fabs(a5[1] - hg.amax) <= hg.amax / 128
                                                               : a5[1] == hg.amax;
        const bool inp_amax_ok = lc.inp_act != ACT_NONE ? std::fabs(a4[2] - hi.amax) <= hi.amax / 128 : a4[2] == hi.amax;
        const bool amax_ok = inp_amax_ok && a4[3] == hw.amax && dout_amax_ok && a4[0] == 0.0f &&
                             a4[1] == 0.0f && a5[0] == 0.0f;
        snprintf(what, sizeof(what), "%s step %d: amax inp %.9g w %.9g dout %.9g = max|x| %.9g %.9g %.9g; linear 0's 0",
                 name, step, a4[2], a4[3], a5[1], hi.amax, hw.amax, hg.amax);
        dev_expect("fp8_linear", what, amax_ok);
        fp8_linears_update(ctx, set);
        host_update(hi);
        host_update(hw);
        host_update(hg);
        const std::vector<float> s4 = dev_download_f32(set.e4m3.scale, 4), s5 = dev_download_f32(set.e5m2.scale, 2);
        const std::vector<float> v4 = dev_download_f32(set.e4m3.scale_inv, 4);
        const bool scale_ok = s4[2] == hi.scale && s4[3] == hw.scale && s5[1] == hg.scale && v4[2] == 1.0f / hi.scale &&
                              s4[0] == 1.0f && s4[1] == 1.0f && s5[0] == 1.0f;
        snprintf(what, sizeof(what), "%s step %d: scales inp %.9g w %.9g dout %.9g = the reference's %.9g %.9g %.9g; "
                 "linear 0's 1", name, step, s4[2], s4[3], s5[1], hi.scale, hw.scale, hg.scale);
        dev_expect("fp8_linear", what, scale_ok);
    }
    for (void* p : std::vector<void*>{d_inp, d_w, d_bias, d_out, d_pre, d_dout, d_dinp, d_dw, d_db, d_pre_bwd, d_pre_out,
                                      d_pre_in})
        CHECK_CUDA(cudaFree(p));
    fp8_linears_free(&set);
}

// ---------------------------------------------------------------------------------------
// benchmark (not --quick; a GPU with FP8): one layer's forward + backward, FP8 against bf16
// (matmul.cuh), at GPT-2 d48's fc (BT 8192, C 1600, OC 6400) and an 8B Llama's down projection

static void run_bench(const CudaContext& ctx, int BT, int C, int OC, const char* what) {
    const size_t n_inp = (size_t)BT * C, n_w = (size_t)OC * C, n_out = (size_t)BT * OC;
    DevRng rng(3);
    floatX *inp = dev_upload(rand_vec(rng, n_inp, 1.0f)), *w = dev_upload(rand_vec(rng, n_w, 0.02f));
    floatX *dout = dev_upload(rand_vec(rng, n_out, 1e-3f)), *out, *dinp, *dw;
    CHECK_CUDA(cudaMalloc(&out, n_out * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&dinp, n_inp * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&dw, n_w * sizeof(floatX)));
    Fp8Linears set;
    fp8_linears_init(&set, 1, FP8_RECIPE_DELAYED, std::max(n_inp, n_out), n_w);
    const double flops = 6.0 * BT * (double)C * OC;
    float ms = bench_ms(ctx, 10, [&] {
        fp8_linear_forward(ctx, fp8_linear(set, 0), out, nullptr, inp, w, nullptr, BT, C, OC);
        fp8_linear_backward(ctx, fp8_linear(set, 0), dinp, dw, nullptr, dout, inp, w, BT, C, OC, false);
    });
    dev_report_tflops("fp8_linear", (std::string(what) + "_fwd_bwd_fp8").c_str(), flops, ms);
    // the backward's two GEMMs with fast accumulation too (the trainer's -fp8fa 2)
    set.fast_accum_backward = true;
    ms = bench_ms(ctx, 10, [&] {
        fp8_linear_forward(ctx, fp8_linear(set, 0), out, nullptr, inp, w, nullptr, BT, C, OC);
        fp8_linear_backward(ctx, fp8_linear(set, 0), dinp, dw, nullptr, dout, inp, w, BT, C, OC, false);
    });
    dev_report_tflops("fp8_linear", (std::string(what) + "_fwd_bwd_fp8_fastbwd").c_str(), flops, ms);
    // the trainer's -fp8kt 1 -fp8kw 1 (fast accumulation as by default): the input kept transposed
    // from the forward, the weight cast once (forgotten each time round, as at one micro-step a step)
    set.fast_accum_backward = false;
    const size_t kept_in = n_inp, kept_w = 2 * n_w;
    fp8_linears_keep_inputs(&set, &kept_in);
    fp8_linears_keep_weights(&set, &kept_w);
    ms = bench_ms(ctx, 10, [&] {
        fp8_linears_forget_weights(set);
        fp8_linear_forward(ctx, fp8_linear(set, 0), out, nullptr, inp, w, nullptr, BT, C, OC);
        fp8_linear_backward(ctx, fp8_linear(set, 0), dinp, dw, nullptr, dout, inp, w, BT, C, OC, false);
    });
    dev_report_tflops("fp8_linear", (std::string(what) + "_fwd_bwd_fp8_kept").c_str(), flops, ms);
    ms = bench_ms(ctx, 10, [&] {
        matmul_forward(ctx, out, nullptr, inp, w, nullptr, BT, C, OC);
        matmul_backward(ctx, dinp, dw, nullptr, dout, inp, w, BT, C, OC, false);
    });
    dev_report_tflops("fp8_linear", (std::string(what) + "_fwd_bwd_bf16").c_str(), flops, ms);
    fp8_linears_free(&set);
    for (void* p : std::vector<void*>{inp, w, dout, out, dinp, dw}) CHECK_CUDA(cudaFree(p));
}
#endif  // ENABLE_BF16

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
#ifndef ENABLE_BF16
    printf("SKIP fp8_linear [%s]: the FP8 linear layer is train_gpt_fp8's, a bf16 build\n", PRECISION_NAME);
    return 0;
#else
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "fp8_linear");
    if (ctx.props.major * 10 + ctx.props.minor < 89) {
        printf("SKIP fp8_linear: sm_%d%d has no FP8 tensor cores (cuBLASLt's FP8 GEMMs need 8.9 or later)\n",
               ctx.props.major, ctx.props.minor);
        cuda_context_free(&ctx);
        return 0;
    }
    if (!g_dev_bench) {
        const LinearCase cases[] = {
            {32, 48, 64, true, false, true},    // bias, dinp accumulated
            {64, 64, 256, true, true, false},   // GPT-2's fc: bias and GELU
            {48, 128, 32, false, false, false}, // OC < C, no bias (Llama's)
            {32, 96, 64, false, false, false, true},  // Llama's projections: out += (into the residual stream)
            // as train_gpt_fp8 runs them, dout through the activation in the cast (delayed scaling
            // only): GPT-2's fc (GELU), Llama's gate/up (SwiGLU: OC = 2F)
            {64, 64, 256, true, false, false, false, ACT_GELU},
            {48, 64, 160, false, false, false, false, ACT_SWIGLU},
            // the projections after them, their input made in the casts: GPT-2's fcproj, Llama's
            // down projection (into the residual stream)
            {64, 256, 64, true, false, false, false, ACT_NONE, ACT_GELU},
            {48, 80, 64, false, false, false, true, ACT_NONE, ACT_SWIGLU},
            // the inputs and the weights kept (-fp8kt 1 -fp8kw 1): plain, and GPT-2's fcproj
            {32, 48, 64, true, false, true, false, ACT_NONE, ACT_NONE, true},
            {64, 256, 64, true, false, false, false, ACT_NONE, ACT_GELU, true},
        };
        for (const LinearCase& lc : cases) {
            run_case(ctx, lc, FP8_RECIPE_DELAYED);
            if (lc.dout_act == ACT_NONE && lc.inp_act == ACT_NONE) run_case(ctx, lc, FP8_RECIPE_CURRENT);
        }
        if (!g_dev_quick) run_case(ctx, {256, 768, 2304, true, false, false}, FP8_RECIPE_DELAYED);
    }
    if (!g_dev_quick) {
        run_bench(ctx, 8192, 1600, 6400, "d48_fc");
        run_bench(ctx, 8192, 14336, 4096, "llama8b_down");
    }
    cuda_context_free(&ctx);
    return dev_finish("fp8_linear");
#endif
}
