// gpu_reference.cu: an independent measurement of each GPU's copy and matmul rates, to check the
// figures of wireup's fingerprint (roles/gpu_trial/files/gpu_fingerprint.py, issue 25) against code
// that shares nothing with it: CUDA runtime copies and cuBLAS (no torch), written for wireup.
//
//   gpu_reference SECONDS [GPU ...]     (default 3 s per figure, every GPU, one after the other)
//
// Per GPU and figure, one JSON line on stdout, in the fingerprint's units and conventions:
//   {"gpu": 0, "figure": "h2d_bytes_per_second", "median": ..., "min": ..., "max": ..., "samples": N}
// Figures: hbm_copy_bytes_per_second (cudaMemcpyAsync device to device of 1 GiB, read + write
// counted), h2d/d2h_bytes_per_second (256 MiB to and from cudaMallocHost memory), and, built with
// -DWITH_CUBLAS, gemm_bf16/fp16/tf32_flops (cublasGemmEx 8192^3, fp32 accumulate; tf32 through
// CUBLAS_COMPUTE_32F_FAST_TF32), 2 N^3 per matmul. Each is timed with CUDA events around batches of
// >= 20 ms, repeated for SECONDS; the median over the batches is the figure.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#ifdef WITH_CUBLAS
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#define CHECK(call)                                                                               \
  do {                                                                                            \
    cudaError_t err_ = (call);                                                                    \
    if (err_ != cudaSuccess) {                                                                    \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_));    \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

static double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  if (n == 0) return 0.0;
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Rates (work per second) of timed batches of op, repeated until `seconds` of wall time are spent.
template <typename Op>
static std::vector<double> sustain(Op op, double work, double seconds, cudaStream_t stream) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  op();  // warm-up
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaEventRecord(start, stream));
  op();
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  int batch = (int)std::ceil(20.0 / std::max(ms, 0.001f));
  batch = std::max(1, std::min(batch, 10000));
  std::vector<double> rates;
  auto began = std::chrono::steady_clock::now();
  for (;;) {
    CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < batch; ++i) op();
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (ms > 0.0f) rates.push_back(work * batch / (ms / 1000.0));
    double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    if (spent >= seconds) break;
  }
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  return rates;
}

static void report(int gpu, const char* figure, const std::vector<double>& rates) {
  if (rates.empty()) {
    printf("{\"gpu\": %d, \"figure\": \"%s\", \"error\": \"no sample\"}\n", gpu, figure);
    return;
  }
  double low = *std::min_element(rates.begin(), rates.end());
  double high = *std::max_element(rates.begin(), rates.end());
  printf("{\"gpu\": %d, \"figure\": \"%s\", \"median\": %.6e, \"min\": %.6e, \"max\": %.6e, \"samples\": %zu}\n",
         gpu, figure, median_of(rates), low, high, rates.size());
  fflush(stdout);
}

static void copies(int gpu, double seconds, cudaStream_t stream) {
  const size_t copy_bytes = (size_t)1 << 30;
  const size_t pcie_bytes = (size_t)256 << 20;
  void *src = nullptr, *dst = nullptr, *host = nullptr;
  CHECK(cudaMalloc(&src, copy_bytes));
  CHECK(cudaMalloc(&dst, copy_bytes));
  CHECK(cudaMemset(src, 1, copy_bytes));
  CHECK(cudaMallocHost(&host, pcie_bytes));
  memset(host, 1, pcie_bytes);
  CHECK(cudaDeviceSynchronize());
  auto d2d = [&] { CHECK(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, stream)); };
  report(gpu, "hbm_copy_bytes_per_second", sustain(d2d, 2.0 * copy_bytes, seconds, stream));
  auto h2d = [&] { CHECK(cudaMemcpyAsync(dst, host, pcie_bytes, cudaMemcpyHostToDevice, stream)); };
  report(gpu, "h2d_bytes_per_second", sustain(h2d, (double)pcie_bytes, seconds, stream));
  auto d2h = [&] { CHECK(cudaMemcpyAsync(host, src, pcie_bytes, cudaMemcpyDeviceToHost, stream)); };
  report(gpu, "d2h_bytes_per_second", sustain(d2h, (double)pcie_bytes, seconds, stream));
  CHECK(cudaFreeHost(host));
  CHECK(cudaFree(src));
  CHECK(cudaFree(dst));
}

#ifdef WITH_CUBLAS
#define CHECK_BLAS(call)                                                                          \
  do {                                                                                            \
    cublasStatus_t st_ = (call);                                                                  \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                           \
      fprintf(stderr, "%s:%d %s: cuBLAS status %d\n", __FILE__, __LINE__, #call, (int)st_);       \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

// Values in [-1, 1) from a hash of the index (no cuRAND): random-looking data draws realistic power.
__device__ float noise(size_t i, unsigned seed) {
  unsigned x = (unsigned)(i * 2654435761u) ^ seed;
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  return (float)(x & 0xffffu) / 32768.0f - 1.0f;
}

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, unsigned seed) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = __float2bfloat16(noise(i, seed));
}

__global__ void fill_fp16(__half* p, size_t n, unsigned seed) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = __float2half(noise(i, seed));
}

__global__ void fill_fp32(float* p, size_t n, unsigned seed) {
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = noise(i, seed);
}

static void gemm(int gpu, const char* figure, cudaDataType_t type, cublasComputeType_t compute, size_t elem,
                 double seconds, cudaStream_t stream, cublasHandle_t handle) {
  const int n = 8192;
  const size_t count = (size_t)n * n;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  CHECK(cudaMalloc(&a, count * elem));
  CHECK(cudaMalloc(&b, count * elem));
  CHECK(cudaMalloc(&c, count * elem));
  unsigned blocks = (unsigned)((count + 255) / 256);
  if (type == CUDA_R_16BF) {
    fill_bf16<<<blocks, 256, 0, stream>>>((__nv_bfloat16*)a, count, 1u);
    fill_bf16<<<blocks, 256, 0, stream>>>((__nv_bfloat16*)b, count, 2u);
  } else if (type == CUDA_R_16F) {
    fill_fp16<<<blocks, 256, 0, stream>>>((__half*)a, count, 1u);
    fill_fp16<<<blocks, 256, 0, stream>>>((__half*)b, count, 2u);
  } else {
    fill_fp32<<<blocks, 256, 0, stream>>>((float*)a, count, 1u);
    fill_fp32<<<blocks, 256, 0, stream>>>((float*)b, count, 2u);
  }
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(stream));
  const float alpha = 1.0f, beta = 0.0f;
  auto op = [&] {
    CHECK_BLAS(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, type, n, b, type, n, &beta, c,
                            type, n, compute, CUBLAS_GEMM_DEFAULT));
  };
  report(gpu, figure, sustain(op, 2.0 * n * (double)n * n, seconds, stream));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
}

static void gemms(int gpu, double seconds, cudaStream_t stream) {
  cublasHandle_t handle;
  CHECK_BLAS(cublasCreate(&handle));
  CHECK_BLAS(cublasSetStream(handle, stream));
  gemm(gpu, "gemm_bf16_flops", CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, seconds, stream, handle);
  gemm(gpu, "gemm_fp16_flops", CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, seconds, stream, handle);
  gemm(gpu, "gemm_tf32_flops", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, seconds, stream, handle);
  CHECK_BLAS(cublasDestroy(handle));
}
#endif

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 3.0;
  if (!(seconds > 0.0)) {
    fprintf(stderr, "usage: %s SECONDS [GPU ...]\n", argv[0]);
    return 2;
  }
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  std::vector<int> gpus;
  for (int i = 2; i < argc; ++i) gpus.push_back(atoi(argv[i]));
  if (gpus.empty())
    for (int i = 0; i < count; ++i) gpus.push_back(i);
  for (int gpu : gpus) {
    if (gpu < 0 || gpu >= count) {
      fprintf(stderr, "no GPU %d (%d visible)\n", gpu, count);
      return 2;
    }
    CHECK(cudaSetDevice(gpu));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, gpu));
    fprintf(stderr, "GPU%d: %s, compute capability %d.%d, PCI %04x:%02x:%02x.0\n", gpu, prop.name, prop.major,
            prop.minor, prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    copies(gpu, seconds, stream);
#ifdef WITH_CUBLAS
    gemms(gpu, seconds, stream);
#else
    printf("{\"gpu\": %d, \"figure\": \"gemm\", \"error\": \"built without cuBLAS\"}\n", gpu);
#endif
    CHECK(cudaStreamDestroy(stream));
  }
  return 0;
}
