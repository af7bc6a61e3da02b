// What a host pays per kernel it launches: an empty kernel through cudaLaunchKernel, and a GEMM
// through cublasLtMatmul (as superbench's cublaslt_gemm and the C++ serving stacks call it).
// Build and run on a CUDA machine:
//   nvcc -O2 -arch=sm_90 scripts/launch_cost.cu -lcublasLt -o launch_cost && ./launch_cost
// Each loop issues its calls back to back with no synchronisation until an end event, so a loop
// whose kernels are shorter than the host's call runs at the host's pace: wall-clock time per
// call is then the host's cost. Prints one CSV line per case: what, m, n, k, calls, host_us
// (wall clock per call, the host's loop), device_us (event to event per call).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#define CHECK_CUDA(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); std::exit(1); } } while (0)
#define CHECK_LT(x) do { cublasStatus_t s = (x); if (s != CUBLAS_STATUS_SUCCESS) { \
    std::fprintf(stderr, "%s:%d cublasLt status %d\n", __FILE__, __LINE__, (int)s); std::exit(1); } } while (0)

__global__ void empty_kernel() {}

template <typename F>
static void timed(const char* what, int m, int n, int k, int calls, F call) {
    for (int i = 0; i < 200; ++i) call();
    CHECK_CUDA(cudaDeviceSynchronize());
    cudaEvent_t start, end;
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&end));
    auto t0 = std::chrono::steady_clock::now();
    CHECK_CUDA(cudaEventRecord(start));
    for (int i = 0; i < calls; ++i) call();
    auto t1 = std::chrono::steady_clock::now();
    CHECK_CUDA(cudaEventRecord(end));
    CHECK_CUDA(cudaEventSynchronize(end));
    CHECK_CUDA(cudaGetLastError());
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, end));
    double host_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / calls;
    std::printf("%s,%d,%d,%d,%d,%.3f,%.3f\n", what, m, n, k, calls, host_us, 1e3 * ms / calls);
    std::fflush(stdout);
}

struct Gemm {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c, d;
    cublasLtMatmulAlgo_t algo;
    void *A, *B, *C, *workspace;
    size_t workspace_bytes = 32u << 20;
    float alpha = 1.0f, beta = 0.0f;
    float* scale;

    // D (m x n, bf16) = A^T (k x m stored, transposed) * B (k x n): the TN layout fp8 needs.
    Gemm(cublasLtHandle_t handle, int m, int n, int k, bool fp8) : lt(handle) {
        cudaDataType_t in = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
        size_t in_bytes = fp8 ? 1 : 2;
        CHECK_CUDA(cudaMalloc(&A, (size_t)m * k * in_bytes));
        CHECK_CUDA(cudaMalloc(&B, (size_t)k * n * in_bytes));
        CHECK_CUDA(cudaMalloc(&C, (size_t)m * n * 2));
        CHECK_CUDA(cudaMemset(A, 0x3c, (size_t)m * k * in_bytes));  // nonzero inputs
        CHECK_CUDA(cudaMemset(B, 0x3c, (size_t)k * n * in_bytes));
        CHECK_CUDA(cudaMalloc(&workspace, workspace_bytes));
        CHECK_CUDA(cudaMalloc(&scale, sizeof(float)));
        float one = 1.0f;
        CHECK_CUDA(cudaMemcpy(scale, &one, sizeof(float), cudaMemcpyHostToDevice));
        CHECK_LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;
        CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
        CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof(nt)));
        if (fp8) {
            CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale, sizeof(scale)));
            CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale, sizeof(scale)));
        }
        CHECK_LT(cublasLtMatrixLayoutCreate(&a, in, k, m, k));
        CHECK_LT(cublasLtMatrixLayoutCreate(&b, in, k, n, k));
        CHECK_LT(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, m, n, m));
        CHECK_LT(cublasLtMatrixLayoutCreate(&d, CUDA_R_16BF, m, n, m));
        cublasLtMatmulPreference_t pref;
        CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
        CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &workspace_bytes, sizeof(workspace_bytes)));
        cublasLtMatmulHeuristicResult_t result;
        int found = 0;
        CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, c, d, pref, 1, &result, &found));
        if (found == 0) { std::fprintf(stderr, "no algorithm\n"); std::exit(1); }
        algo = result.algo;
        cublasLtMatmulPreferenceDestroy(pref);
    }
    void operator()() {
        CHECK_LT(cublasLtMatmul(lt, desc, &alpha, A, a, B, b, &beta, C, c, C, d, &algo, workspace,
                                workspace_bytes, 0));
    }
};

int main() {
    std::printf("what,m,n,k,calls,host_us,device_us\n");
    timed("empty_kernel", 0, 0, 0, 20000, [] { empty_kernel<<<1, 32>>>(); });
    timed("empty_kernel_132_blocks", 0, 0, 0, 20000, [] { empty_kernel<<<132, 128>>>(); });
    cublasLtHandle_t lt;
    CHECK_LT(cublasLtCreate(&lt));
    const int sizes[][3] = {{64, 64, 64}, {128, 128, 128}, {1024, 1024, 1024}, {2048, 2048, 2048}};
    for (auto& s : sizes) {
        Gemm bf16(lt, s[0], s[1], s[2], false);
        timed("cublasLtMatmul_bf16", s[0], s[1], s[2], 5000, [&] { bf16(); });
        Gemm fp8(lt, s[0], s[1], s[2], true);
        timed("cublasLtMatmul_fp8", s[0], s[1], s[2], 5000, [&] { fp8(); });
    }
    return 0;
}
