"""Models that the benchmark scripts share (bench/torch/train.py, bench/torch/capture_traces.py): random weights,
built here so that the A/B and the captured traces run the same network."""


def unet3d(torch, base=32, levels=4):
    """A 3D UNet (random weights): per level two 3x3x3 conv + BatchNorm + ReLU, max-pool down, transposed conv up,
    skip connections concatenated; channels base x 2^level."""
    nn = torch.nn

    def block(cin, cout):
        return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1), nn.BatchNorm3d(cout), nn.ReLU(inplace=True),
                             nn.Conv3d(cout, cout, 3, padding=1), nn.BatchNorm3d(cout), nn.ReLU(inplace=True))

    class UNet3D(nn.Module):
        def __init__(self):
            super().__init__()
            ch = [base * 2 ** i for i in range(levels)]
            self.down = nn.ModuleList([block(1 if i == 0 else ch[i - 1], ch[i]) for i in range(levels)])
            self.up = nn.ModuleList([nn.ConvTranspose3d(ch[i], ch[i - 1], 2, stride=2)
                                     for i in range(levels - 1, 0, -1)])
            self.dec = nn.ModuleList([block(2 * ch[i - 1], ch[i - 1]) for i in range(levels - 1, 0, -1)])
            self.head = nn.Conv3d(ch[0], 2, 1)

        def forward(self, x):
            skips = []
            for i, b in enumerate(self.down):
                x = b(x)
                if i < len(self.down) - 1:
                    skips.append(x)
                    x = torch.nn.functional.max_pool3d(x, 2)
            for up, dec in zip(self.up, self.dec):
                x = up(x)
                x = dec(torch.cat([x, skips.pop()], 1))
            return self.head(x)

    return UNet3D()
