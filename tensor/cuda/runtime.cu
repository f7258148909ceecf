// CUDA runtime: device queries, one non-blocking stream per device, the stream-ordered caching
// allocator (CUDA memory pools via cudaMallocAsync, with the release threshold at its maximum so
// freed blocks stay cached) and byte accounting, and host<->device copies.
#include <cstdio>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor/cuda/common.cuh"

namespace sprig::cuda {

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  throw std::runtime_error(std::string("[cuda] ") + cudaGetErrorString(err) + " in " + expr +
                           " at " + file + ":" + std::to_string(line));
}

namespace {

struct DeviceState {
  cudaStream_t stream = nullptr;
  std::unordered_map<void*, size_t> sizes;
  size_t current = 0, peak = 0;
};

std::mutex& state_mutex() {
  static std::mutex m;
  return m;
}

DeviceState& state(int device) {
  static std::vector<DeviceState> states(static_cast<size_t>(device_count()));
  if (device < 0 || device >= static_cast<int>(states.size()))
    throw std::invalid_argument("[cuda] device " + std::to_string(device) + " is not available");
  DeviceState& s = states[static_cast<size_t>(device)];
  if (!s.stream) {
    const DeviceGuard guard(device);
    CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    cudaMemPool_t pool;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    uint64_t threshold = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  }
  return s;
}

}  // namespace

int device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no driver" error
      return 0;
    }
    return n;
  }();
  return count;
}

int runtime_version() {
  int v = 0;
  return cudaRuntimeGetVersion(&v) == cudaSuccess ? v : 0;
}

int driver_version() {
  int v = 0;
  return cudaDriverGetVersion(&v) == cudaSuccess ? v : 0;
}

std::string device_name(int device) {
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

DeviceGuard::DeviceGuard(int device) : device_(device) {
  CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device_) CUDA_CHECK(cudaSetDevice(device_));
}

// No throw from a destructor: a failed restore is reported and its error cleared.
DeviceGuard::~DeviceGuard() {
  if (previous_ == device_) return;
  const cudaError_t err = cudaSetDevice(previous_);
  if (err != cudaSuccess) {
    cudaGetLastError();
    std::fprintf(stderr, "[cuda] restoring device %d failed: %s\n", previous_,
                 cudaGetErrorString(err));
  }
}

cudaStream_t current_stream(int device) {
  std::lock_guard<std::mutex> lock(state_mutex());
  return state(device).stream;
}

void synchronize(int device) { CUDA_CHECK(cudaStreamSynchronize(current_stream(device))); }

void* device_malloc(size_t bytes, int device) {
  std::lock_guard<std::mutex> lock(state_mutex());
  DeviceState& s = state(device);
  const DeviceGuard guard(device);
  void* p = nullptr;
  const cudaError_t err = cudaMallocAsync(&p, bytes, s.stream);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error("[cuda] out of memory allocating " + std::to_string(bytes) +
                             " bytes on cuda:" + std::to_string(device) + " (" +
                             std::to_string(s.current) + " bytes in use)");
  }
  s.sizes[p] = bytes;
  s.current += bytes;
  if (s.current > s.peak) s.peak = s.current;
  return p;
}

void device_free(void* ptr, int device) {
  std::lock_guard<std::mutex> lock(state_mutex());
  DeviceState& s = state(device);
  auto it = s.sizes.find(ptr);
  if (it != s.sizes.end()) {
    s.current -= it->second;
    s.sizes.erase(it);
  }
  // No throw from destructors: a failed free is reported here and its error cleared, so the next
  // CUDA_CHECK does not blame an unrelated call for it.
  const cudaError_t err = cudaFreeAsync(ptr, s.stream);
  if (err != cudaSuccess) {
    cudaGetLastError();
    std::fprintf(stderr, "[cuda] freeing memory on cuda:%d failed: %s\n", device,
                 cudaGetErrorString(err));
  }
}

size_t memory_allocated(int device) {
  std::lock_guard<std::mutex> lock(state_mutex());
  return state(device).current;
}

size_t memory_peak(int device) {
  std::lock_guard<std::mutex> lock(state_mutex());
  return state(device).peak;
}

void reset_memory_peak(int device) {
  std::lock_guard<std::mutex> lock(state_mutex());
  DeviceState& s = state(device);
  s.peak = s.current;
}

void copy_host_to_device(void* dst, const void* src, size_t bytes, int device) {
  cudaStream_t stream = current_stream(device);
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

void copy_device_to_host(void* dst, const void* src, size_t bytes, int device) {
  cudaStream_t stream = current_stream(device);
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace sprig::cuda
