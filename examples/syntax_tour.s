; syntax_tour.s: one instruction of every opcode, to show the assembly syntax (docs/isa.md).
; The values are illustrative: this passes check() but is not meant to run on a chip.
;   tinycoral asm examples/syntax_tour.s -o tour.bin && tinycoral disasm tour.bin
start length_bits=19456
op tiles=0x0001 seq=0 loops=(8)(2) in=(4 x 8)(-28 x 2 m1) out=(1 x 2) par.base=0x10 par=(1 x 8) mult=0.5 clamp_max=255 clamp_min=-1 out_zp=3
pool tiles=0x0002 seq=1 loops=(3)(3) par=(1 x 3)(4 x 3) offset=-128
reduce tiles=0x0004 seq=2 loops=(16) par=(1 x 16) nlu_mode=7
op05 tiles=0x0008 seq=3 rsv62=0x1234
ringprod tiles=0x0001 seq=4 addr=0x2078 src=(1 x 1) mode=3 pcfg=20 r0.id=81 r0.val=2 dest=0x10000
ringcons0 tiles=0x000f seq=5 addr=0x2070 dst=(1 x 2) cbuf=1 slots=2 s_id=43 s_val=-128 s_cnt=2
ringcons1 tiles=0xffff seq=6 addr=0x10 dst=(1 x 4)(-3 x 2) aux_en0=1 aux_addr0=0x12
n2w tiles=0x0001 seq=7 n.addr=0x100 n=(1 x 16) w.addr=0x2078 w=(1 x 1) w.rows=1 sync.en0=1 sync.id=16 sync.val=0xffff
w2n tiles=0x0001 seq=8 w.addr=0x2070 w=(1 x 2) n.addr=0x40 n=(1 x 64) mode=1 sync.id=14 sync.dec=-1
mesh_s tiles=0x000f seq=9 o.addr=0x100 o=(1 x 8) i.addr=0x200 i=(1 x 8) in_mode=3
mesh_w tiles=0x00f0 seq=10 fill_en=1 fill=0x80808080 i.addr=0x40 i=(1 x 4)
mesh_n tiles=0x0f00 seq=11 s0.id=10 s0.val=5
mesh_e tiles=0xf000 seq=12 o.addr=0x20 o=(1 x 4)
nlu tiles=0xffff seq=13 s0c0=32.0826 s0c1=13.8574 b0=-5.63985 b6=8.47242 mode=3
sync tiles=0xffff seq=14 counters=0x7ffff units=0x3ff signal=1
bundle gate=1 pred_reg=1 pred_pol=1 s_op=0x21 s_x=5 s_y=5 imm=1
loop count=4 body=2
bundle enable_vector=3 vs_reg_v1=7 imm_size=0x26
bundle v_op=8 vs_reg=7
branch offset=-3
scsync tiles=0xffff smask=0x020 thr5=16 wait=0x020 sunits=0x0c
pop stream=1 walk=(1 x 16384)(-16383 x 2) av140=1 count_m1=99 tail_en=1
infeed stream=1 buf_off=0x10 walk=(1 x 100) av176=1 count_m1=99 pop_wait=0x11 dest=0x000f lanes_m1=3
outfeed walk=(0 x 8) k173=3 f222=0x7f
halt code=1
nop
nop
nop
nop
end length_bits=128
