// energy.h: the GPU's energy counter through NVML (the driver's management library), for
// joules per token, watts and kWh per run. NVML is opened at run time with dlopen, so the
// trainer builds and runs where it is missing; then it says once why there is no energy.
// The counter (millijoules since the driver loaded, Volta and newer) covers the whole board.
// defines: EnergyMeter, energy_meter_init, energy_meter_read, energy_meter_free
#pragma once
#include <dlfcn.h>

#include <string>

struct EnergyMeter {
    bool ok = false;
    std::string why;             // when !ok: what is missing
    void* lib = nullptr;
    void* device = nullptr;      // nvmlDevice_t
    int (*get_energy)(void*, unsigned long long*) = nullptr;  // nvmlDeviceGetTotalEnergyConsumption
    const char* (*error_string)(int) = nullptr;
    double start_j = 0.0;        // the counter at init
};

// pci_bus_id: the CUDA device's "domain:bus:device.function" (cudaDeviceGetPCIBusId).
inline void energy_meter_init(EnergyMeter* m, const char* pci_bus_id) {
    m->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (m->lib == nullptr) { m->why = "libnvidia-ml.so.1 not found"; return; }
    auto init = (int (*)())dlsym(m->lib, "nvmlInit_v2");
    auto by_bus = (int (*)(const char*, void**))dlsym(m->lib, "nvmlDeviceGetHandleByPciBusId_v2");
    m->get_energy = (int (*)(void*, unsigned long long*))dlsym(m->lib, "nvmlDeviceGetTotalEnergyConsumption");
    m->error_string = (const char* (*)(int))dlsym(m->lib, "nvmlErrorString");
    if (!init || !by_bus || !m->get_energy || !m->error_string) { m->why = "NVML lacks the energy functions"; return; }
    int rc = init();
    if (rc == 0) rc = by_bus(pci_bus_id, &m->device);
    unsigned long long mj = 0;
    if (rc == 0) rc = m->get_energy(m->device, &mj);
    if (rc != 0) {
        m->why = std::string("NVML: ") + m->error_string(rc);
        return;
    }
    m->ok = true;
    m->start_j = mj / 1000.0;
}

// The counter in joules (-1 when there is none).
inline double energy_meter_read(EnergyMeter* m) {
    unsigned long long mj = 0;
    if (!m->ok || m->get_energy(m->device, &mj) != 0) return -1.0;
    return mj / 1000.0;
}

inline void energy_meter_free(EnergyMeter* m) {
    if (m->lib != nullptr) {
        auto shutdown = (int (*)())dlsym(m->lib, "nvmlShutdown");
        if (m->ok && shutdown) shutdown();
        dlclose(m->lib);
    }
    *m = EnergyMeter();
}
