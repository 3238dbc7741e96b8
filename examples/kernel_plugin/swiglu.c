/* SwiGLU on the CPU, for the kernel plugin of swiglu.toml. Rows of x hold the gate half
 * then the up half; y gets one half-row per row. */
#include <math.h>
#include <stdint.h>

void swiglu_rows_f32(const float* x, float* y, int64_t rows, int64_t d, float alpha) {
  for (int64_t r = 0; r < rows; r++) {
    const float* a = x + r * 2 * d;
    const float* b = a + d;
    float* out = y + r * d;
    for (int64_t i = 0; i < d; i++) {
      out[i] = a[i] / (1.0f + expf(-alpha * a[i])) * b[i];
    }
  }
}

/* The same function through sigmoid(t) = (1 + tanh(t / 2)) / 2. */
void swiglu_tanh_f32(const float* x, float* y, int64_t rows, int64_t d, float alpha) {
  for (int64_t r = 0; r < rows; r++) {
    const float* a = x + r * 2 * d;
    const float* b = a + d;
    float* out = y + r * d;
    for (int64_t i = 0; i < d; i++) {
      out[i] = 0.5f * a[i] * (1.0f + tanhf(0.5f * alpha * a[i])) * b[i];
    }
  }
}
