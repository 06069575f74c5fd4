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


def res_block(torch):
    """The residual block of unet2d and vae_decoder (random weights): GroupNorm(32), SiLU, 3x3 conv, twice, plus a
    1x1 skip where channels change. Returns the class."""
    nn = torch.nn
    F = torch.nn.functional

    class Res(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.n1, self.c1 = nn.GroupNorm(32, cin), nn.Conv2d(cin, cout, 3, padding=1)
            self.n2, self.c2 = nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x):
            h = self.c1(F.silu(self.n1(x)))
            h = self.c2(F.silu(self.n2(h)))
            return h + self.skip(x)

    return Res


def unet2d(torch, in_ch=4, base=128, mults=(1, 2, 4, 4), heads=8):
    """A latent-diffusion-style 2D UNet (random weights): per level one residual block (GroupNorm(32), SiLU, 3x3
    conv, twice, plus a 1x1 skip where channels change), a strided 3x3 conv down; at the lowest level a residual
    block, multi-head self-attention over the positions and another residual block; up by nearest x2 and a 3x3 conv,
    skip connections concatenated. Channels base x mults[level]. No timestep embedding: the memory pattern is what
    counts here."""
    nn = torch.nn
    F = torch.nn.functional

    Res = res_block(torch)

    class Attn(nn.Module):
        def __init__(self, ch):
            super().__init__()
            self.norm = nn.GroupNorm(32, ch)
            self.attn = nn.MultiheadAttention(ch, heads, batch_first=True)

        def forward(self, x):
            b, c, h, w = x.shape
            t = self.norm(x).flatten(2).transpose(1, 2)
            t, _ = self.attn(t, t, t, need_weights=False)
            return x + t.transpose(1, 2).reshape(b, c, h, w)

    class UNet2D(nn.Module):
        def __init__(self):
            super().__init__()
            ch = [base * m for m in mults]
            self.inp = nn.Conv2d(in_ch, ch[0], 3, padding=1)
            self.down = nn.ModuleList([Res(ch[max(i - 1, 0)], ch[i]) for i in range(len(ch))])
            self.pool = nn.ModuleList([nn.Conv2d(ch[i], ch[i], 3, stride=2, padding=1) for i in range(len(ch) - 1)])
            self.mid = nn.ModuleList([Res(ch[-1], ch[-1]), Attn(ch[-1]), Res(ch[-1], ch[-1])])
            self.upconv = nn.ModuleList([nn.Conv2d(ch[i], ch[i - 1], 3, padding=1) for i in range(len(ch) - 1, 0, -1)])
            self.dec = nn.ModuleList([Res(2 * ch[i - 1], ch[i - 1]) for i in range(len(ch) - 1, 0, -1)])
            self.out = nn.Sequential(nn.GroupNorm(32, ch[0]), nn.SiLU(), nn.Conv2d(ch[0], in_ch, 3, padding=1))

        def forward(self, x):
            x = self.inp(x)
            skips = []
            for i, blk in enumerate(self.down):
                x = blk(x)
                if i < len(self.pool):
                    skips.append(x)
                    x = self.pool[i](x)
            for m in self.mid:
                x = m(x)
            for up, dec in zip(self.upconv, self.dec):
                skip = skips.pop()
                x = up(F.interpolate(x, size=skip.shape[-2:], mode="nearest"))
                x = dec(torch.cat([x, skip], 1))
            return self.out(x)

    return UNet2D()


def vae_decoder(torch, z_ch=4, chs=(512, 512, 256, 128)):
    """The decoder of a latent-diffusion-style VAE (random weights): a 3x3 conv from z_ch to chs[0], two residual
    blocks (res_block) at the latent's size, then per level two residual blocks and, but for the last level, a
    nearest x2 upsample and a 3x3 conv; GroupNorm(32), SiLU and a 3x3 conv to RGB. A latent of h x w decodes to
    8h x 8w pixels with chs = 4 levels: activations of up to chs[-1] channels at full resolution."""
    nn = torch.nn
    F = torch.nn.functional
    Res = res_block(torch)

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Conv2d(z_ch, chs[0], 3, padding=1)
            self.mid = nn.Sequential(Res(chs[0], chs[0]), Res(chs[0], chs[0]))
            self.levels = nn.ModuleList([nn.Sequential(Res(chs[max(i - 1, 0)], chs[i]), Res(chs[i], chs[i]))
                                         for i in range(len(chs))])
            self.up = nn.ModuleList([nn.Conv2d(chs[i], chs[i], 3, padding=1) for i in range(len(chs) - 1)])
            self.out = nn.Sequential(nn.GroupNorm(32, chs[-1]), nn.SiLU(), nn.Conv2d(chs[-1], 3, 3, padding=1))

        def forward(self, z):
            x = self.mid(self.inp(z))
            for i, level in enumerate(self.levels):
                x = level(x)
                if i < len(self.up):
                    x = self.up[i](F.interpolate(x, scale_factor=2.0, mode="nearest"))
            return self.out(x)

    return Decoder()
