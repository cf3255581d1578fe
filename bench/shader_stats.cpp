// wgrt_shader_stats: what the Vulkan driver makes of the SPIR-V that Dawn hands it, per kernel:
// the driver's own statistics (NVIDIA: registers per thread, shared memory, code size; Mesa:
// instruction counts, spills) through VK_KHR_pipeline_executable_properties, and whatever
// internal representations the driver offers, written beside the input.
//
//   wgrt_shader_stats FILE.spv...        (SPIR-V binaries, e.g. from bench/shader-stats.sh)
//
// Each file is compiled as one compute pipeline outside Dawn, on the first Vulkan device (or
// WGRT_STATS_DEVICE=N). Its descriptor set layout is read from the module itself: every
// Binding-decorated variable of set 0 becomes a storage or uniform buffer as its storage class
// says, and a push-constant block gets the device's whole push-constant range. Prints one
// line per file: its name, then "statistic=value" for each statistic of each executable.
// This is a measuring aid, not part of the engine: it speaks Vulkan directly because WebGPU
// has no way to ask a pipeline what it compiled to.
#include <vulkan/vulkan.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct ModuleInfo {
  std::string entry;
  std::map<uint32_t, VkDescriptorType> bindings;  // set 0 only
  bool push_constants = false;
};

std::vector<uint32_t> read_words(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open '" + path + "'");
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < 20 || bytes.size() % 4)
    throw std::runtime_error("'" + path + "' is not a SPIR-V binary (hint: assemble a dump with spirv-as)");
  std::vector<uint32_t> w(bytes.size() / 4);
  std::memcpy(w.data(), bytes.data(), bytes.size());
  if (w[0] != 0x07230203u) throw std::runtime_error("'" + path + "': no SPIR-V magic number");
  return w;
}

// The entry point, and the bindings of descriptor set 0 with their buffer kinds.
ModuleInfo parse_module(const std::vector<uint32_t>& w) {
  constexpr uint32_t kOpEntryPoint = 15, kOpVariable = 59, kOpDecorate = 71, kOpTypePointer = 32;
  constexpr uint32_t kDecBinding = 33, kDecSet = 34;
  constexpr uint32_t kUniform = 2, kPushConstant = 9, kStorageBuffer = 12;
  std::map<uint32_t, uint32_t> binding, set, pointer_class, var_class;
  ModuleInfo info;
  for (size_t i = 5; i < w.size();) {
    const uint32_t op = w[i] & 0xFFFF, n = w[i] >> 16;
    if (n == 0 || i + n > w.size()) throw std::runtime_error("malformed SPIR-V instruction stream");
    if (op == kOpEntryPoint && info.entry.empty()) info.entry = reinterpret_cast<const char*>(&w[i + 3]);
    if (op == kOpDecorate && n >= 4 && w[i + 2] == kDecBinding) binding[w[i + 1]] = w[i + 3];
    if (op == kOpDecorate && n >= 4 && w[i + 2] == kDecSet) set[w[i + 1]] = w[i + 3];
    if (op == kOpTypePointer) pointer_class[w[i + 1]] = w[i + 2];
    if (op == kOpVariable) var_class[w[i + 2]] = w[i + 3];
    i += n;
  }
  for (const auto& [id, cls] : var_class) {
    if (cls == kPushConstant) info.push_constants = true;
    auto b = binding.find(id);
    if (b == binding.end() || set[id] != 0) continue;
    if (cls == kStorageBuffer) info.bindings[b->second] = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    else if (cls == kUniform) info.bindings[b->second] = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
  }
  if (info.entry.empty()) throw std::runtime_error("no entry point in the module");
  return info;
}

void vk_check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) throw std::runtime_error(std::string(what) + " failed (VkResult " + std::to_string(r) + ")");
}

struct Context {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  uint32_t push_bytes = 128;
  PFN_vkGetPipelineExecutablePropertiesKHR properties = nullptr;
  PFN_vkGetPipelineExecutableStatisticsKHR statistics = nullptr;
  PFN_vkGetPipelineExecutableInternalRepresentationsKHR representations = nullptr;
};

Context open_device() {
  Context c;
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "wgrt_shader_stats";
  app.apiVersion = VK_API_VERSION_1_3;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  vk_check(vkCreateInstance(&ici, nullptr, &c.instance), "vkCreateInstance");
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(c.instance, &n, nullptr);
  std::vector<VkPhysicalDevice> devices(n);
  vkEnumeratePhysicalDevices(c.instance, &n, devices.data());
  const char* pick = std::getenv("WGRT_STATS_DEVICE");
  const uint32_t index = pick ? uint32_t(std::atoi(pick)) : 0;
  if (index >= n) throw std::runtime_error("no Vulkan device " + std::to_string(index) + " (hint: WGRT_STATS_DEVICE)");
  c.physical = devices[index];
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(c.physical, &props);
  c.push_bytes = props.limits.maxPushConstantsSize;
  std::printf("# device: %s (driver 0x%x)\n", props.deviceName, props.driverVersion);

  // Every feature the device has (the module may need subgroups, int8 dot products, f16, the
  // memory model...), plus pipelineExecutableInfo.
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR exec{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceVulkan13Features f13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, &exec};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, &f13};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
  vkGetPhysicalDeviceFeatures2(c.physical, &features);
  if (!exec.pipelineExecutableInfo)
    throw std::runtime_error(std::string(props.deviceName) + " has no VK_KHR_pipeline_executable_properties");

  uint32_t families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(c.physical, &families, nullptr);
  std::vector<VkQueueFamilyProperties> fam(families);
  vkGetPhysicalDeviceQueueFamilyProperties(c.physical, &families, fam.data());
  uint32_t family = 0;
  while (family < families && !(fam[family].queueFlags & VK_QUEUE_COMPUTE_BIT)) ++family;
  const float priority = 1;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  const char* extensions[] = {VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME};
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &features};
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = 1;
  dci.ppEnabledExtensionNames = extensions;
  vk_check(vkCreateDevice(c.physical, &dci, nullptr, &c.device), "vkCreateDevice");
  c.properties = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      vkGetDeviceProcAddr(c.device, "vkGetPipelineExecutablePropertiesKHR"));
  c.statistics = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vkGetDeviceProcAddr(c.device, "vkGetPipelineExecutableStatisticsKHR"));
  c.representations = reinterpret_cast<PFN_vkGetPipelineExecutableInternalRepresentationsKHR>(
      vkGetDeviceProcAddr(c.device, "vkGetPipelineExecutableInternalRepresentationsKHR"));
  return c;
}

std::string stat_value(const VkPipelineExecutableStatisticKHR& s) {
  switch (s.format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: return s.value.b32 ? "true" : "false";
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: return std::to_string(s.value.i64);
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: return std::to_string(s.value.u64);
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: return std::to_string(s.value.f64);
    default: return "?";
  }
}

std::string squash(const char* name) {
  std::string s = name;
  for (char& ch : s)
    if (ch == ' ' || ch == '=') ch = '_';
  return s;
}

// Compiles one module and prints its line; internal representations go to PATH.ir<i>.txt.
void report(Context& c, const std::string& path) {
  const std::vector<uint32_t> words = read_words(path);
  const ModuleInfo info = parse_module(words);
  VkShaderModuleCreateInfo smi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  smi.codeSize = words.size() * 4;
  smi.pCode = words.data();
  VkShaderModule module;
  vk_check(vkCreateShaderModule(c.device, &smi, nullptr, &module), "vkCreateShaderModule");
  std::vector<VkDescriptorSetLayoutBinding> lb;
  for (const auto& [b, type] : info.bindings)
    lb.push_back({b, type, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
  VkDescriptorSetLayoutCreateInfo dsl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dsl.bindingCount = uint32_t(lb.size());
  dsl.pBindings = lb.data();
  VkDescriptorSetLayout set_layout;
  vk_check(vkCreateDescriptorSetLayout(c.device, &dsl, nullptr, &set_layout), "vkCreateDescriptorSetLayout");
  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, c.push_bytes};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &set_layout;
  pli.pushConstantRangeCount = info.push_constants ? 1 : 0;
  pli.pPushConstantRanges = &push;
  VkPipelineLayout layout;
  vk_check(vkCreatePipelineLayout(c.device, &pli, nullptr, &layout), "vkCreatePipelineLayout");
  VkComputePipelineCreateInfo cpi{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  cpi.flags = VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR | VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR;
  cpi.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  cpi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  cpi.stage.module = module;
  cpi.stage.pName = info.entry.c_str();
  cpi.layout = layout;
  VkPipeline pipeline;
  vk_check(vkCreateComputePipelines(c.device, VK_NULL_HANDLE, 1, &cpi, nullptr, &pipeline), "vkCreateComputePipelines");

  std::string line = path;
  VkPipelineInfoKHR pinfo{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  pinfo.pipeline = pipeline;
  uint32_t n = 0;
  c.properties(c.device, &pinfo, &n, nullptr);
  std::vector<VkPipelineExecutablePropertiesKHR> execs(n, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR});
  c.properties(c.device, &pinfo, &n, execs.data());
  for (uint32_t e = 0; e < n; ++e) {
    VkPipelineExecutableInfoKHR ei{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    ei.pipeline = pipeline;
    ei.executableIndex = e;
    line += " | " + squash(execs[e].name) + " subgroup=" + std::to_string(execs[e].subgroupSize);
    uint32_t ns = 0;
    c.statistics(c.device, &ei, &ns, nullptr);
    std::vector<VkPipelineExecutableStatisticKHR> stats(ns, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    c.statistics(c.device, &ei, &ns, stats.data());
    for (const auto& s : stats) line += " " + squash(s.name) + "=" + stat_value(s);
    uint32_t nr = 0;
    c.representations(c.device, &ei, &nr, nullptr);
    std::vector<VkPipelineExecutableInternalRepresentationKHR> reps(
        nr, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR});
    c.representations(c.device, &ei, &nr, reps.data());
    std::vector<std::vector<char>> text(nr);
    for (uint32_t r = 0; r < nr; ++r) {
      text[r].resize(reps[r].dataSize + 1);
      reps[r].pData = text[r].data();
    }
    if (nr) c.representations(c.device, &ei, &nr, reps.data());
    for (uint32_t r = 0; r < nr; ++r) {
      const std::string out = path + ".ir" + std::to_string(e) + "-" + std::to_string(r) + ".txt";
      std::ofstream f(out, std::ios::binary);
      f << "// " << reps[r].name << ": " << reps[r].description << "\n";
      f.write(text[r].data(), std::streamsize(reps[r].dataSize));
      line += " ir=" + out;
    }
  }
  std::printf("%s\n", line.c_str());
  vkDestroyPipeline(c.device, pipeline, nullptr);
  vkDestroyPipelineLayout(c.device, layout, nullptr);
  vkDestroyDescriptorSetLayout(c.device, set_layout, nullptr);
  vkDestroyShaderModule(c.device, module, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: wgrt_shader_stats FILE.spv... (hint: bench/shader-stats.sh makes them)\n");
    return 2;
  }
  try {
    Context c = open_device();
    int failed = 0;
    for (int i = 1; i < argc; ++i) {
      try {
        report(c, argv[i]);
      } catch (const std::exception& e) {
        std::printf("%s | error: %s\n", argv[i], e.what());
        ++failed;
      }
    }
    vkDestroyDevice(c.device, nullptr);
    vkDestroyInstance(c.instance, nullptr);
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wgrt_shader_stats: %s\n", e.what());
    return 1;
  }
}
