// A kernel metajit generated for test_nn_cells_transformer.py (a layer-norm backward fused into a generated
// matrix product), reduced to what still makes NVRTC 13.0 and 13.5 segfault at NVVM's -O3. Compiled by
// tests/python/test_cuda.py with the flags of generated kernels (jit/toolchain/nvrtc_compiler.cc).
typedef unsigned int uint32_t;
typedef long long int64_t;
extern "C" __global__ void __launch_bounds__(256) metajit_kernel(
    float* __restrict__ out0,  // float32 [2, 5, 24]
    const float* __restrict__ in0,  // float32 [2, 5, 16]
    const float* __restrict__ in1,  // float32 [2, 5, 16]
    const float* __restrict__ in2,  // float32 [2, 5, 16]
    const float* __restrict__ in3,  // float32 [2, 5, 16]
    const float* __restrict__ in4,  // float32 [2, 5, 16]
    const float* __restrict__ in5,  // float32 [16]
    const float* __restrict__ in6,  // float32 [2, 5, 16]
    const float* __restrict__ in7,  // float32 [2, 5, 16]
    const float* __restrict__ in8,  // float32 [16]
    const float* __restrict__ in9,  // float32 [2, 5, 1]
    const float* __restrict__ in10,  // float32 [2, 5, 1]
    const float* __restrict__ in11,  // float32 [16]
    const float* __restrict__ in12,  // float32 [16]
    const float* __restrict__ in13,  // float32 [2, 5, 16]
    const float* __restrict__ in14,  // float32 [16]
    const float* __restrict__ in15,  // float32 [2, 5, 1]
    const float* __restrict__ in16,  // float32 [16]
    const float* __restrict__ in17,  // float32 [16]
    const float* __restrict__ in18,  // float32 [2, 5, 16]
    const float* __restrict__ in19)  // float32 [16, 24]
{
  for (int64_t row = (int64_t)blockIdx.x * 256 + threadIdx.x; row < 10; row += (int64_t)gridDim.x * 256) {
    const int64_t i1 = (uint32_t)row % 5u;
    const int64_t row_1 = (uint32_t)row / 5u;
    const int64_t i0 = row_1;
    float sum_0 = (float)0;
    for (int64_t r2 = 0; r2 < 16; ++r2) {
    }
    float sum_32 = (float)0;
    for (int64_t r2 = 0; r2 < 16; ++r2) {
    }
    float sum_61 = (float)0;
    for (int64_t r2 = 0; r2 < 16; ++r2) {
    }
    float sum_3 = (float)0;
    for (int64_t r2 = 0; r2 < 16; ++r2) {
      const float in1_4 = in1[((r2 + (i1 * 16LL)) + (i0 * 80LL))];
      const float in2_5 = in2[((r2 + (i1 * 16LL)) + (i0 * 80LL))];
      const float add_6 = (float)(in1_4 + in2_5);
      const float in3_7 = in3[((r2 + (i1 * 16LL)) + (i0 * 80LL))];
      const float add_8 = (float)(add_6 + in3_7);
      const float in4_9 = in4[((r2 + (i1 * 16LL)) + (i0 * 80LL))];
      const float add_10 = (float)(add_8 + in4_9);
      const float in5_11 = in5[r2];
      const float mul_12 = (float)(add_10 * in5_11);
      const float in6_13 = in6[((r2 + (i1 * 16LL)) + (i0 * 80LL))];
      const float in7_14 = in7[((r2 + (i1 * 16LL)) + (i0 * 80LL))];
      const float in8_15 = in8[r2];
      const float add_16 = (float)(in7_14 + in8_15);
      const float add_17 = (float)(in6_13 + add_16);
      const float in9_18 = in9[(i1 + (i0 * 5LL))];
      const float sub_19 = (float)(add_17 - in9_18);
      const float in10_20 = in10[(i1 + (i0 * 5LL))];
      const float mul_21 = (float)(sub_19 * in10_20);
      const float in11_22 = in11[r2];
      const float mul_23 = (float)(mul_21 * in11_22);
      const float in12_24 = in12[r2];
      const float add_25 = (float)(mul_23 + in12_24);
      const float in13_26 = in13[((r2 + (i1 * 16LL)) + (i0 * 80LL))];
      const float in14_27 = in14[r2];
      const float add_28 = (float)(in13_26 + in14_27);
      const float add_29 = (float)(add_25 + add_28);
      const float in15_30 = in15[(i1 + (i0 * 5LL))];
      const float sub_31 = (float)(add_29 - in15_30);
      const float div_53 = (float)(sum_32 / (16.0f));
      const float add_54 = (float)(div_53 + (9.99999975e-06f));
      const float rsqrt_55 = (1.0f / sqrtf(add_54));
      const float mul_56 = (float)(sub_31 * rsqrt_55);
      const float in16_57 = in16[r2];
      const float mul_58 = (float)(mul_56 * in16_57);
      const float in17_59 = in17[r2];
      const float add_60 = (float)(mul_58 + in17_59);
      const float div_89 = (float)(sum_61 / (16.0f));
      const float sub_90 = (float)(add_60 - div_89);
      const float mul_91 = (float)(mul_12 * sub_90);
      const float sum_3_term = mul_91;
      sum_3 = (float)(sum_3 + sum_3_term);
    }
    float sum_92 = (float)0;
    for (int64_t r2 = 0; r2 < 16; ++r2) {
    }
    float sum_107 = (float)0;
    for (int64_t r2 = 0; r2 < 16; ++r2) {
    }
    float sum_121 = (float)0;
    for (int64_t r2 = 0; r2 < 16; ++r2) {
    }
    float sum_155 = (float)0;
    for (int64_t r2 = 0; r2 < 16; ++r2) {
    }
    for (int64_t i2 = 0; i2 < 24; ++i2) {
      float sum_158 = (float)0;
      for (int64_t r2 = 0; r2 < 16; ++r2) {
        const float in1_159 = in1[((r2 + (i1 * 16LL)) + (i0 * 80LL))];
        const float in2_160 = in2[((r2 + (i1 * 16LL)) + (i0 * 80LL))];
        const float add_161 = (float)(in1_159 + in2_160);
        const float in3_162 = in3[((r2 + (i1 * 16LL)) + (i0 * 80LL))];
        const float add_163 = (float)(add_161 + in3_162);
        const float in4_164 = in4[((r2 + (i1 * 16LL)) + (i0 * 80LL))];
        const float add_165 = (float)(add_163 + in4_164);
        const float in5_166 = in5[r2];
        const float mul_167 = (float)(add_165 * in5_166);
        const float div_168 = (float)(sum_0 / (16.0f));
        const float add_169 = (float)(div_168 + (9.99999975e-06f));
        const float rsqrt_170 = (1.0f / sqrtf(add_169));
        const float mul_171 = (float)(mul_167 * rsqrt_170);
        const float mul_172 = (float)(sum_3 * (-0.5f));
        const float mul_173 = (float)(rsqrt_170 * rsqrt_170);
        const float mul_174 = (float)(rsqrt_170 * mul_173);
        const float mul_175 = (float)(mul_172 * mul_174);
        const float div_176 = (float)(mul_175 / (16.0f));
        const float in0_177 = in0[((r2 + (i1 * 16LL)) + (i0 * 80LL))];
        const float mul_178 = (float)(div_176 * in0_177);
        const float mul_179 = (float)(div_176 * in0_177);
        const float add_180 = (float)(mul_178 + mul_179);
        const float add_181 = (float)(mul_171 + add_180);
        const float add_182 = (float)(sum_92 + sum_107);
        const float div_183 = (float)(add_182 / (16.0f));
        const float add_184 = (float)(add_181 + div_183);
        const float in16_185 = in16[r2];
        const float mul_186 = (float)(add_184 * in16_185);
        const float div_187 = (float)(sum_32 / (16.0f));
        const float add_188 = (float)(div_187 + (9.99999975e-06f));
        const float rsqrt_189 = (1.0f / sqrtf(add_188));
        const float mul_190 = (float)(mul_186 * rsqrt_189);
        const float in18_191 = in18[((r2 + (i1 * 16LL)) + (i0 * 80LL))];
        const float add_192 = (float)(mul_190 + in18_191);
        const float add_193 = (float)(sum_121 + sum_155);
        const float div_194 = (float)(add_193 / (16.0f));
        const float add_195 = (float)(add_192 + div_194);
        const float in19_196 = in19[(i2 + (r2 * 24LL))];
        const float mul_197 = (float)(add_195 * in19_196);
        const float sum_158_term = mul_197;
        sum_158 = (float)(sum_158 + sum_158_term);
      }
      out0[((i2 + (i1 * 24LL)) + (i0 * 120LL))] = sum_158;
    }
  }
}
