forward—Default/net-Net/add-op0addbHaten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensorj
selfinput.0j
otherinput.1j

alpha1¬Default/net-Net/conv2d-op1conv2dbŠaten::conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, int[2] dilation=1, int groups=1) -> Tensorj
inputinput.0j
weightinput.1j
biasNonej
stride[1, 1]j
padding[1, 1]j
dilation[1, 1]j
groups1|Default/net-Net/cat-op2catb0aten::cat(Tensor[] tensors, int dim=0) -> Tensorj
tensors[input.0, input.1]j	
dim-1qDefault/net-Net/relu-op3relub&aten::save(t item, str filename) -> ()j
iteminput.0j
filename"/tmp/x"¹Default/net-Net/expand-op4expandbMaten::expand(Tensor(a) self, int[] size, *, bool implicit=False) -> Tensor(a)j
selfinput.0j
size[1000000, 1000000, 80]j
implicitFalse˜Default/net-Net/to-op5tob‰aten::to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, bool copy=False, MemoryFormat? memory_format=None) -> Tensor(a)j"
selfinput.99999999999999999999j
dtype99j
non_blockingFalsej
copyFalsej
memory_formatNone»Default/net-Net/layer_norm-op6
layer_normb‘aten::layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, bool cudnn_enable=True) -> Tensorj
inputinput.0j
normalized_shape	[[[[8]]]]j
weightinput.1j
biasinput.2j
eps1e-05j
cudnn_enableTruežDefault/net-Net/softmax-op7softmaxbIaten::softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensorj
selfinput.0j	
dim-1j
dtypeNone