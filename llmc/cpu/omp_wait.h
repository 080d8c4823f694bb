// omp_wait.h: how the CPU trainer's OpenMP threads wait between parallel loops.
// defines: omp_wait_setup
//
// A training step is hundreds of parallel loops, each ending in a barrier. GCC's OpenMP
// (libgomp) makes a thread that reaches a barrier first spin there, 300,000 rounds by
// default, before it sleeps. On a quiet machine that is what we want. On a machine where
// another process keeps a core busy, it is the worst case: three threads share two cores, and
// the one spinning at the barrier takes the CPU time the one still working needs. Measured
// on a 2-core EPYC with one core kept busy, d12 B=4 T=64: 2.3x slower than on the quiet
// machine with the default, 1.7x with a spin of 3,000 rounds (about a microsecond), which on
// the quiet machine costs nothing measurable (one fully passive wait costs 10% on small
// models, whose loops are short and come back to back).
//
// libgomp reads GOMP_SPINCOUNT once, when it loads, before main() runs; so when the user has
// set neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY, the program sets the short spin and starts
// itself again (exec: same process, same arguments). Either variable set by the user wins.
#pragma once
#include <cstdlib>
#include <unistd.h>

// Call first in main(), before MPI, threads or files. Returns only if it did not exec (the
// user chose a policy, or the exec failed: then the run goes on with libgomp's default).
inline void omp_wait_setup(char** argv) {
#if defined(_OPENMP) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__)
    if (getenv("GOMP_SPINCOUNT") != nullptr || getenv("OMP_WAIT_POLICY") != nullptr) return;
    setenv("GOMP_SPINCOUNT", "3000", 1);
    execv("/proc/self/exe", argv);
    // the exec failed (no /proc): carry on as we are
#else
    (void)argv;
#endif
}
