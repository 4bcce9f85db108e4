; hello.s: the smallest complete Edge TPU program, written by hand in tinycoral's assembly
; syntax (docs/isa.md). It moves no data: it fences all tiles, raises the completion
; interrupt (a host DMA descriptor with tag 4) and halts.
;
;   tinycoral asm examples/hello.s -o hello.bin
;   tinycoral disasm --check hello.bin
;
; Fields not written are zero. Word offsets on the left are optional.

start length_bits=2560                                              ; 128 x (22 words - 2)

; prologue: reset every tile sync counter, then set up the scalar fences (isa.md 1.4)
sync tiles=0xffff seq=0 counters=0x7ffff units=0x3ff signal=1
scsync tiles=0xffff smask=0x1ff tokwait=1 tmask=0xffff sunits=0x1f

; epilogue: final tile fence, wait for every tile's token
sync tiles=0xffff seq=1 units=0x3ff signal=1 f109=3
scsync tiles=0xffff tokwait=1 tmask=0xffff sunits=0x0c

; completion interrupt: descriptor (address lo, address hi, length, tag) = (0, 0, 0, 4)
bundle s_op=0x2f s_x=4                                              ; s4 = 0
bundle s_op=0x2f s_x=5                                              ; s5 = 0
bundle s_op=0x2f s_x=6                                              ; s6 = 0
bundle s_op=0x2f s_x=7 imm=4                                        ; s7 = 4
bundle v_op=0x0a vs_reg=4                                           ; desc[0] = s4
bundle v_op=0x0a v_offset=1 vs_reg=5                                ; desc[1] = s5
bundle v_op=0x0a v_offset=2 vs_reg=6                                ; desc[2] = s6
bundle v_op=0x0a v_offset=3 vs_reg=7                                ; desc[3] = s7
bundle v_op=0x0c                                                    ; issue it

; every program ends with halt, four nops and end
halt code=4
nop
nop
nop
nop
end length_bits=128
