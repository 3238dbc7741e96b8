/* Prints the size, alignment and member offsets of every ABI structure, and the value of
 * every ABI constant, one "name value" pair per line, for tests/header.rs to compare with
 * the Rust definitions. */
#include <stdio.h>

#include "torchtrt_plugin.h"

#define SIZE(T) printf(#T " %zu\n" #T ".align %zu\n", sizeof(T), _Alignof(T))
#define OFF(T, m) printf(#T "." #m " %zu\n", offsetof(T, m))
#define CONST(c) printf(#c " %lld\n", (long long)(c))

int main(void) {
  SIZE(TtrtErrorBuf);
  OFF(TtrtErrorBuf, data);
  OFF(TtrtErrorBuf, capacity);

  SIZE(TtrtTensorDesc);
  OFF(TtrtTensorDesc, dtype);
  OFF(TtrtTensorDesc, format);
  OFF(TtrtTensorDesc, nb_dims);
  OFF(TtrtTensorDesc, reserved);
  OFF(TtrtTensorDesc, dims);

  SIZE(TtrtPortDesc);
  OFF(TtrtPortDesc, dtype);
  OFF(TtrtPortDesc, format);

  SIZE(TtrtField);
  OFF(TtrtField, name);
  OFF(TtrtField, field_type);
  OFF(TtrtField, reserved);
  OFF(TtrtField, length);
  OFF(TtrtField, data);

  SIZE(TtrtFieldSpec);
  OFF(TtrtFieldSpec, name);
  OFF(TtrtFieldSpec, field_type);
  OFF(TtrtFieldSpec, required);
  OFF(TtrtFieldSpec, min_len);
  OFF(TtrtFieldSpec, max_len);
  OFF(TtrtFieldSpec, default_value);
  OFF(TtrtFieldSpec, doc);

  SIZE(TtrtShapeExpr);
  OFF(TtrtShapeExpr, nb_dims);
  OFF(TtrtShapeExpr, reserved);
  OFF(TtrtShapeExpr, dims);

  SIZE(TtrtExprBuilder);
  OFF(TtrtExprBuilder, ctx);
  OFF(TtrtExprBuilder, constant);
  OFF(TtrtExprBuilder, operation);
  OFF(TtrtExprBuilder, constant_value);
  OFF(TtrtExprBuilder, unknown);

  SIZE(TtrtShapeValues);
  OFF(TtrtShapeValues, kind);
  OFF(TtrtShapeValues, count);
  OFF(TtrtShapeValues, ints);
  OFF(TtrtShapeValues, floats);

  SIZE(TtrtLaunch);
  OFF(TtrtLaunch, device);
  OFF(TtrtLaunch, device_ordinal);
  OFF(TtrtLaunch, nb_inputs);
  OFF(TtrtLaunch, nb_outputs);
  OFF(TtrtLaunch, input_descs);
  OFF(TtrtLaunch, output_descs);
  OFF(TtrtLaunch, inputs);
  OFF(TtrtLaunch, outputs);
  OFF(TtrtLaunch, workspace);
  OFF(TtrtLaunch, workspace_size);
  OFF(TtrtLaunch, stream);
  OFF(TtrtLaunch, threads);
  OFF(TtrtLaunch, reserved);
  OFF(TtrtLaunch, cuda);
  OFF(TtrtLaunch, shape_values);

  SIZE(TtrtKernelLaunch);
  OFF(TtrtKernelLaunch, program);
  OFF(TtrtKernelLaunch, program_len);
  OFF(TtrtKernelLaunch, source);
  OFF(TtrtKernelLaunch, source_len);
  OFF(TtrtKernelLaunch, kernel);
  OFF(TtrtKernelLaunch, kernel_len);
  OFF(TtrtKernelLaunch, grid);
  OFF(TtrtKernelLaunch, block);
  OFF(TtrtKernelLaunch, shared_bytes);
  OFF(TtrtKernelLaunch, nb_args);
  OFF(TtrtKernelLaunch, args);
  OFF(TtrtKernelLaunch, arg_sizes);

  SIZE(TtrtCudaRuntime);
  OFF(TtrtCudaRuntime, self);
  OFF(TtrtCudaRuntime, launch);
  OFF(TtrtCudaRuntime, resident_blocks);
  OFF(TtrtCudaRuntime, constant);

  SIZE(TtrtPlugin);
  OFF(TtrtPlugin, self);
  OFF(TtrtPlugin, num_outputs);
  OFF(TtrtPlugin, output_dtypes);
  OFF(TtrtPlugin, output_shapes);
  OFF(TtrtPlugin, supports);
  OFF(TtrtPlugin, configure);
  OFF(TtrtPlugin, workspace_size);
  OFF(TtrtPlugin, enqueue);
  OFF(TtrtPlugin, serialize_fields);
  OFF(TtrtPlugin, clone);
  OFF(TtrtPlugin, destroy);
  OFF(TtrtPlugin, shape_inputs);
  OFF(TtrtPlugin, output_shapes_of);
  OFF(TtrtPlugin, sized_outputs);
  OFF(TtrtPlugin, tactics);
  OFF(TtrtPlugin, set_tactic);
  OFF(TtrtPlugin, aliased_input);

  SIZE(TtrtSizedOutput);
  OFF(TtrtSizedOutput, output);
  OFF(TtrtSizedOutput, axis);
  OFF(TtrtSizedOutput, count);

  SIZE(TtrtTactic);
  OFF(TtrtTactic, id);
  OFF(TtrtTactic, name);

  SIZE(TtrtCreator);
  OFF(TtrtCreator, self);
  OFF(TtrtCreator, plugin_namespace);
  OFF(TtrtCreator, name);
  OFF(TtrtCreator, version);
  OFF(TtrtCreator, fields);
  OFF(TtrtCreator, nb_fields);
  OFF(TtrtCreator, capabilities);
  OFF(TtrtCreator, create);

  SIZE(TtrtNode);
  OFF(TtrtNode, name);
  OFF(TtrtNode, op_type);
  OFF(TtrtNode, domain);
  OFF(TtrtNode, opset);
  OFF(TtrtNode, attributes);
  OFF(TtrtNode, nb_attributes);
  OFF(TtrtNode, nb_inputs);
  OFF(TtrtNode, inputs);
  OFF(TtrtNode, nb_outputs);
  OFF(TtrtNode, reserved);

  SIZE(TtrtNetworkBuilder);
  OFF(TtrtNetworkBuilder, abi_version);
  OFF(TtrtNetworkBuilder, size);
  OFF(TtrtNetworkBuilder, ctx);
  OFF(TtrtNetworkBuilder, tensor_desc);
  OFF(TtrtNetworkBuilder, tensor_value);
  OFF(TtrtNetworkBuilder, add_constant);
  OFF(TtrtNetworkBuilder, add_binary);
  OFF(TtrtNetworkBuilder, add_unary);
  OFF(TtrtNetworkBuilder, add_matmul);
  OFF(TtrtNetworkBuilder, add_reshape);
  OFF(TtrtNetworkBuilder, add_transpose);
  OFF(TtrtNetworkBuilder, add_concat);
  OFF(TtrtNetworkBuilder, add_cast);
  OFF(TtrtNetworkBuilder, add_plugin);
  OFF(TtrtNetworkBuilder, set_output);

  SIZE(TtrtConverter);
  OFF(TtrtConverter, abi_version);
  OFF(TtrtConverter, reserved);
  OFF(TtrtConverter, self);
  OFF(TtrtConverter, domain);
  OFF(TtrtConverter, op_type);
  OFF(TtrtConverter, since_opset);
  OFF(TtrtConverter, until_opset);
  OFF(TtrtConverter, convert);

  SIZE(TtrtCustomOp);
  OFF(TtrtCustomOp, abi_version);
  OFF(TtrtCustomOp, reserved);
  OFF(TtrtCustomOp, self);
  OFF(TtrtCustomOp, domain);
  OFF(TtrtCustomOp, op_type);
  OFF(TtrtCustomOp, nb_inputs);
  OFF(TtrtCustomOp, nb_outputs);
  OFF(TtrtCustomOp, attributes);
  OFF(TtrtCustomOp, nb_attributes);
  OFF(TtrtCustomOp, reserved1);
  OFF(TtrtCustomOp, output_dtypes);
  OFF(TtrtCustomOp, output_shapes);
  OFF(TtrtCustomOp, supports);
  OFF(TtrtCustomOp, cpu_kernel);
  OFF(TtrtCustomOp, cuda_kernel);

  SIZE(TtrtExtension);
  OFF(TtrtExtension, abi_version);
  OFF(TtrtExtension, nb_creators);
  OFF(TtrtExtension, provider);
  OFF(TtrtExtension, creators);
  OFF(TtrtExtension, nb_converters);
  OFF(TtrtExtension, reserved0);
  OFF(TtrtExtension, converters);
  OFF(TtrtExtension, nb_custom_ops);
  OFF(TtrtExtension, reserved1);
  OFF(TtrtExtension, custom_ops);

  CONST(TTRT_ABI_VERSION);
  CONST(TTRT_ABI_VERSION_MIN);
  CONST(TTRT_SHAPE_VALUES_UNKNOWN);
  CONST(TTRT_SHAPE_VALUES_INTS);
  CONST(TTRT_SHAPE_VALUES_FLOATS);
  CONST(TTRT_MAX_DIMS);
  CONST(TTRT_DIM_INVALID);
  CONST(TTRT_OK);
  CONST(TTRT_ERROR_INVALID_ARGUMENT);
  CONST(TTRT_ERROR_UNSUPPORTED);
  CONST(TTRT_ERROR_EXECUTION);
  CONST(TTRT_ERROR_PANIC);
  CONST(TTRT_DTYPE_F32);
  CONST(TTRT_DTYPE_F16);
  CONST(TTRT_DTYPE_BF16);
  CONST(TTRT_DTYPE_F64);
  CONST(TTRT_DTYPE_I64);
  CONST(TTRT_DTYPE_I32);
  CONST(TTRT_DTYPE_I16);
  CONST(TTRT_DTYPE_I8);
  CONST(TTRT_DTYPE_U8);
  CONST(TTRT_DTYPE_U16);
  CONST(TTRT_DTYPE_U32);
  CONST(TTRT_DTYPE_U64);
  CONST(TTRT_DTYPE_BOOL);
  CONST(TTRT_FORMAT_LINEAR);
  CONST(TTRT_DEVICE_CPU);
  CONST(TTRT_DEVICE_CUDA);
  CONST(TTRT_FIELD_F16);
  CONST(TTRT_FIELD_F32);
  CONST(TTRT_FIELD_F64);
  CONST(TTRT_FIELD_I8);
  CONST(TTRT_FIELD_I16);
  CONST(TTRT_FIELD_I32);
  CONST(TTRT_FIELD_I64);
  CONST(TTRT_FIELD_BF16);
  CONST(TTRT_FIELD_CHAR);
  CONST(TTRT_FIELD_DIMS);
  CONST(TTRT_FIELD_BYTES);
  CONST(TTRT_DIM_ADD);
  CONST(TTRT_DIM_SUB);
  CONST(TTRT_DIM_MUL);
  CONST(TTRT_DIM_FLOOR_DIV);
  CONST(TTRT_DIM_CEIL_DIV);
  CONST(TTRT_DIM_MIN);
  CONST(TTRT_DIM_MAX);
  CONST(TTRT_CONVERTER_ABI_VERSION);
  CONST(TTRT_CUSTOM_OP_ABI_VERSION);
  CONST(TTRT_TENSOR_NONE);
  CONST(TTRT_BINARY_ADD);
  CONST(TTRT_BINARY_SUB);
  CONST(TTRT_BINARY_MUL);
  CONST(TTRT_BINARY_DIV);
  CONST(TTRT_BINARY_POW);
  CONST(TTRT_BINARY_MAX);
  CONST(TTRT_BINARY_MIN);
  CONST(TTRT_UNARY_ABS);
  CONST(TTRT_UNARY_NEG);
  CONST(TTRT_UNARY_EXP);
  CONST(TTRT_UNARY_LOG);
  CONST(TTRT_UNARY_SQRT);
  CONST(TTRT_UNARY_RECIPROCAL);
  CONST(TTRT_UNARY_ERF);
  CONST(TTRT_UNARY_RELU);
  CONST(TTRT_UNARY_SIGMOID);
  CONST(TTRT_UNARY_TANH);
  CONST(TTRT_UNARY_LEAKY_RELU);
  CONST(TTRT_UNARY_CLIP);
  CONST(TTRT_UNARY_HARD_SIGMOID);
  CONST(TTRT_UNARY_HARD_SWISH);
  CONST(TTRT_UNARY_SOFTPLUS);
  CONST(TTRT_UNARY_GELU);
  CONST(TTRT_TACTIC_NAME_LEN);
  CONST(TTRT_CAPABILITY_SHAPE_INPUTS);
  CONST(TTRT_CAPABILITY_SIZED_OUTPUTS);
  CONST(TTRT_CAPABILITY_TACTICS);
  CONST(TTRT_CAPABILITY_ALIASED_OUTPUTS);
  printf("TTRT_ENTRY_POINT %s\n", TTRT_ENTRY_POINT);
  return 0;
}
