// backend.cpp — which table serves which device.
#include "tensor/backend.h"

#include <map>
#include <stdexcept>
#include <string>

namespace gg {

const Backend& cpu_backend_table();  // tensor/cpu_backend.cpp

namespace {
std::map<Device, const Backend*>& registry() {
    static std::map<Device, const Backend*> tables{{Device::CPU, &cpu_backend_table()}};
    return tables;
}
}  // namespace

const Backend& backend(Device device) {
    auto it = registry().find(device);
    if (it == registry().end())
        throw std::runtime_error(std::string("backend: no ") + device_name(device) +
                                 " backend (gatedgrad was built without it, or no device is present)");
    return *it->second;
}

bool device_available(Device device) { return registry().contains(device); }

void register_backend(Device device, const Backend* table) { registry()[device] = table; }

}  // namespace gg
