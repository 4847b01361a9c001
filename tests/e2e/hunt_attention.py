"""graphdump hunt's test of intended infinities (test_hunt.py): attention scores masked with
masked_fill(-inf) on every step (padding, not hits); at step 2 sequence 1 is all padding, so
its rows are all -inf and softmax makes NaN from them."""
import torch

torch.manual_seed(0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(4, 4)

    def forward(self, x, pad):
        scores = self.q(x) @ x.transpose(1, 2)
        scores = scores.masked_fill(pad.unsqueeze(1), float("-inf"))
        return torch.softmax(scores, -1).sum()


net = Net()
optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
for step in range(5):
    x = torch.randn(3, 5, 4)
    pad = torch.zeros(3, 5, dtype=torch.bool)
    pad[:, 4] = True
    if step == 2:
        pad[1] = True
    loss = net(x, pad)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
