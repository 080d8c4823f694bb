// emu_report.h: the PASS/FAIL lines of the emulator's cuBLASLt test programs (test_emu_cublaslt,
// test_emu_cublaslt_algos, test_emu_fp8_gemm), one a check, and their count for the last line;
// test_emu.sh counts the lines that start with PASS.
#pragma once
#include <cstdarg>
#include <cstdio>

static int g_pass = 0, g_fail = 0;

// prints "PASS: " or "FAIL: " and the check's description, counts it, returns ok
static bool report(bool ok, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    (ok ? g_pass : g_fail)++;
    return ok;
}
