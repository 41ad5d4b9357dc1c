// Copyright The Kelp Authors. Written for Kelp from NIST SP 800-38D and the
// Intel/AMD instruction set references.

//go:build amd64 && !purego

#include "textflag.h"

// Byte layout conventions used below.
//
// Round keys: each 16-byte AES round key is stored twice in a row (32 bytes),
// so one VAESENC with a 256-bit memory operand applies it to two blocks.
//
// GHASH: a GCM block b_0..b_127 (b_0 = most significant bit of byte 0) is the
// field element sum b_i x^i. Reversing the 16 bytes of a block and reading
// them as a little-endian 128-bit integer gives the "reflected" integer
// R(a) = sum a_i 2^(127-i). PCLMULQDQ of R(a) and R(b x^-1) is a 256-bit
// integer T with bit p the coefficient of x^(255-p) of a polynomial
// congruent to a*b; its upper half already holds degrees 0..127 and the
// lower half (degrees 128..255) is folded in with two multiplications by
// the constant 0xC200000000000000 (x^128 = x^7+x^2+x+1, reflected). The
// table of powers holds R(H^k x^-1) for k = 16 down to 1 (offset (16-k)*16).

// Counter byte order: bytes 0..11 kept, 12..15 reversed (big-endian
// 32-bit counter <-> little-endian dword 3, so VPADDD increments it
// modulo 2^32 exactly as inc32 does).
DATA ctrSwap<>+0(SB)/8, $0x0706050403020100
DATA ctrSwap<>+8(SB)/8, $0x0c0d0e0f0b0a0908
DATA ctrSwap<>+16(SB)/8, $0x0706050403020100
DATA ctrSwap<>+24(SB)/8, $0x0c0d0e0f0b0a0908
GLOBL ctrSwap<>(SB), (NOPTR+RODATA), $32

// Adds 0 to the low lane's counter and 1 to the high lane's.
DATA ctrInc01<>+0(SB)/8, $0
DATA ctrInc01<>+8(SB)/8, $0
DATA ctrInc01<>+16(SB)/8, $0
DATA ctrInc01<>+24(SB)/8, $0x0000000100000000
GLOBL ctrInc01<>(SB), (NOPTR+RODATA), $32

// Adds 2 to both lanes' counters.
DATA ctrInc22<>+0(SB)/8, $0
DATA ctrInc22<>+8(SB)/8, $0x0000000200000000
DATA ctrInc22<>+16(SB)/8, $0
DATA ctrInc22<>+24(SB)/8, $0x0000000200000000
GLOBL ctrInc22<>(SB), (NOPTR+RODATA), $32

// Added to big-endian counter blocks [c, c+1] to get [c+2k, c+2k+1] for
// k = 1..7 when the low byte of the counter does not carry within the
// sixteen blocks: 2k is added to byte 15 alone (the top byte of dword 3).
DATA ctrBE<>+0(SB)/8, $0
DATA ctrBE<>+8(SB)/8, $0x0200000000000000
DATA ctrBE<>+16(SB)/8, $0
DATA ctrBE<>+24(SB)/8, $0x0200000000000000
DATA ctrBE<>+32(SB)/8, $0
DATA ctrBE<>+40(SB)/8, $0x0400000000000000
DATA ctrBE<>+48(SB)/8, $0
DATA ctrBE<>+56(SB)/8, $0x0400000000000000
DATA ctrBE<>+64(SB)/8, $0
DATA ctrBE<>+72(SB)/8, $0x0600000000000000
DATA ctrBE<>+80(SB)/8, $0
DATA ctrBE<>+88(SB)/8, $0x0600000000000000
DATA ctrBE<>+96(SB)/8, $0
DATA ctrBE<>+104(SB)/8, $0x0800000000000000
DATA ctrBE<>+112(SB)/8, $0
DATA ctrBE<>+120(SB)/8, $0x0800000000000000
DATA ctrBE<>+128(SB)/8, $0
DATA ctrBE<>+136(SB)/8, $0x0a00000000000000
DATA ctrBE<>+144(SB)/8, $0
DATA ctrBE<>+152(SB)/8, $0x0a00000000000000
DATA ctrBE<>+160(SB)/8, $0
DATA ctrBE<>+168(SB)/8, $0x0c00000000000000
DATA ctrBE<>+176(SB)/8, $0
DATA ctrBE<>+184(SB)/8, $0x0c00000000000000
DATA ctrBE<>+192(SB)/8, $0
DATA ctrBE<>+200(SB)/8, $0x0e00000000000000
DATA ctrBE<>+208(SB)/8, $0
DATA ctrBE<>+216(SB)/8, $0x0e00000000000000
GLOBL ctrBE<>(SB), (NOPTR+RODATA), $224

// Adds 16 to both lanes' (little-endian) counters.
DATA ctrInc16<>+0(SB)/8, $0
DATA ctrInc16<>+8(SB)/8, $0x0000001000000000
DATA ctrInc16<>+16(SB)/8, $0
DATA ctrInc16<>+24(SB)/8, $0x0000001000000000
GLOBL ctrInc16<>(SB), (NOPTR+RODATA), $32

// CTRBE16 makes the sixteen counter blocks [c .. c+15] in Y0-Y7 from
// Y8 = [c, c+1] (little-endian counters) with one byte swap, valid when
// c mod 256 <= 0xf0, and advances Y8 by 16. swap is the ctrSwap mask.
#define CTRBE16(swap) \
	VPSHUFB swap, Y8, Y0; \
	VPADDD  ctrBE<>+0(SB), Y0, Y1; \
	VPADDD  ctrBE<>+32(SB), Y0, Y2; \
	VPADDD  ctrBE<>+64(SB), Y0, Y3; \
	VPADDD  ctrBE<>+96(SB), Y0, Y4; \
	VPADDD  ctrBE<>+128(SB), Y0, Y5; \
	VPADDD  ctrBE<>+160(SB), Y0, Y6; \
	VPADDD  ctrBE<>+192(SB), Y0, Y7; \
	VPADDD  ctrInc16<>(SB), Y8, Y8

// Reverses the 16 bytes of each lane.
DATA byteRev<>+0(SB)/8, $0x08090a0b0c0d0e0f
DATA byteRev<>+8(SB)/8, $0x0001020304050607
DATA byteRev<>+16(SB)/8, $0x08090a0b0c0d0e0f
DATA byteRev<>+24(SB)/8, $0x0001020304050607
GLOBL byteRev<>(SB), (NOPTR+RODATA), $32

// Reduction constant (x^7+x^2+x+1 reflected, aligned to the top of a qword).
DATA polyC<>+0(SB)/8, $0xc200000000000000
DATA polyC<>+8(SB)/8, $0xc200000000000000
GLOBL polyC<>(SB), (NOPTR+RODATA), $16

// ---------------------------------------------------------------------------
// Key expansion (FIPS-197 section 5.2) with AESKEYGENASSIST, constant time.

// PREFIXXOR sets lane j of x to the XOR of lanes 0..j.
#define PREFIXXOR(x, t) \
	MOVOU x, t; PSLLDQ $4, t; PXOR t, x; \
	MOVOU x, t; PSLLDQ $8, t; PXOR t, x

// STORERK writes round key x twice (32 bytes) at off(DI).
#define STORERK(x, off) \
	MOVOU x, off(DI); MOVOU x, off+16(DI)

// func expandKey128(key *byte, rk *byte)
TEXT ·expandKey128(SB), NOSPLIT, $0-16
	MOVQ key+0(FP), SI
	MOVQ rk+8(FP), DI
	MOVOU (SI), X1
	STORERK(X1, 0)

#define EXP128(rcon, off) \
	AESKEYGENASSIST $rcon, X1, X2; PSHUFD $0xff, X2, X2; \
	PREFIXXOR(X1, X4); PXOR X2, X1; STORERK(X1, off)

	EXP128(0x01, 32)
	EXP128(0x02, 64)
	EXP128(0x04, 96)
	EXP128(0x08, 128)
	EXP128(0x10, 160)
	EXP128(0x20, 192)
	EXP128(0x40, 224)
	EXP128(0x80, 256)
	EXP128(0x1b, 288)
	EXP128(0x36, 320)
	PXOR X1, X1
	PXOR X2, X2
	PXOR X4, X4
	RET

// func expandKey256(key *byte, rk *byte)
TEXT ·expandKey256(SB), NOSPLIT, $0-16
	MOVQ key+0(FP), SI
	MOVQ rk+8(FP), DI
	MOVOU (SI), X1
	MOVOU 16(SI), X3
	STORERK(X1, 0)
	STORERK(X3, 32)

// Even round key: w[i] for i%8 == 0 uses SubWord(RotWord(w[i-1])) ^ rcon,
// w[i-1] being lane 3 of X3; the result replaces X1.
#define EXP256A(rcon, off) \
	AESKEYGENASSIST $rcon, X3, X2; PSHUFD $0xff, X2, X2; \
	PREFIXXOR(X1, X4); PXOR X2, X1; STORERK(X1, off)

// Odd round key: w[i] for i%8 == 4 uses SubWord(w[i-1]), w[i-1] being lane 3
// of X1; the result replaces X3.
#define EXP256B(off) \
	AESKEYGENASSIST $0, X1, X2; PSHUFD $0xaa, X2, X2; \
	PREFIXXOR(X3, X4); PXOR X2, X3; STORERK(X3, off)

	EXP256A(0x01, 64)
	EXP256B(96)
	EXP256A(0x02, 128)
	EXP256B(160)
	EXP256A(0x04, 192)
	EXP256B(224)
	EXP256A(0x08, 256)
	EXP256B(288)
	EXP256A(0x10, 320)
	EXP256B(352)
	EXP256A(0x20, 384)
	EXP256B(416)
	EXP256A(0x40, 448)
	PXOR X1, X1
	PXOR X2, X2
	PXOR X3, X3
	PXOR X4, X4
	RET

// ---------------------------------------------------------------------------
// CTR mode with VAES: two blocks per YMM register.

// One AES round on Y0-Y7; the round key is loaded once into Y15.
#define AESRND8(off) \
	VMOVDQU off(AX), Y15; \
	VAESENC Y15, Y0, Y0; VAESENC Y15, Y1, Y1; \
	VAESENC Y15, Y2, Y2; VAESENC Y15, Y3, Y3; \
	VAESENC Y15, Y4, Y4; VAESENC Y15, Y5, Y5; \
	VAESENC Y15, Y6, Y6; VAESENC Y15, Y7, Y7

#define AESLAST8(off) \
	VMOVDQU off(AX), Y15; \
	VAESENCLAST Y15, Y0, Y0; VAESENCLAST Y15, Y1, Y1; \
	VAESENCLAST Y15, Y2, Y2; VAESENCLAST Y15, Y3, Y3; \
	VAESENCLAST Y15, Y4, Y4; VAESENCLAST Y15, Y5, Y5; \
	VAESENCLAST Y15, Y6, Y6; VAESENCLAST Y15, Y7, Y7

#define NEXTCTR(y) \
	VPSHUFB Y10, Y8, y; VPADDD Y9, Y8, Y8

#define XORSTORE(y, off) \
	VPXOR off(SI), y, y; VMOVDQU y, off(DI)

// CLEARKEYS zeroes the registers that held keystream or round keys (do not
// leave them behind a return) and leaves the AVX state clean.
#define CLEARKEYS \
	VPXOR Y0, Y0, Y0 \
	VPXOR Y1, Y1, Y1 \
	VPXOR Y2, Y2, Y2 \
	VPXOR Y3, Y3, Y3 \
	VPXOR Y4, Y4, Y4 \
	VPXOR Y5, Y5, Y5 \
	VPXOR Y6, Y6, Y6 \
	VPXOR Y7, Y7, Y7 \
	VPXOR Y15, Y15, Y15 \
	VZEROUPPER

// func ctrXOR(rk *byte, rounds int, ctr *[16]byte, dst, src *byte, nblocks int)
//
// dst[i] = src[i] ^ AES_K(ctr + i) for nblocks 16-byte blocks, the counter
// being the last 32 bits of ctr (big-endian), incremented modulo 2^32.
TEXT ·ctrXOR(SB), NOSPLIT, $0-48
	MOVQ rk+0(FP), AX
	MOVQ rounds+8(FP), R8
	MOVQ ctr+16(FP), BX
	MOVQ dst+24(FP), DI
	MOVQ src+32(FP), SI
	MOVQ nblocks+40(FP), CX

	VMOVDQU ctrSwap<>(SB), Y10
	VMOVDQU ctrInc22<>(SB), Y9
	VBROADCASTI128 (BX), Y8
	VPSHUFB Y10, Y8, Y8
	VPADDD ctrInc01<>(SB), Y8, Y8 // Y8 = [c, c+1], counters little-endian
	MOVL   12(BX), R11
	BSWAPL R11                     // R11 = c (public: derived from the nonce)

loop16:
	CMPQ CX, $16
	JB   tail

	MOVL R11, R12
	ANDL $0xff, R12
	CMPL R12, $0xf0
	JA   carry16
	CTRBE16(Y10)
	JMP  ctr16ok

carry16:
	NEXTCTR(Y0)
	NEXTCTR(Y1)
	NEXTCTR(Y2)
	NEXTCTR(Y3)
	NEXTCTR(Y4)
	NEXTCTR(Y5)
	NEXTCTR(Y6)
	NEXTCTR(Y7)

ctr16ok:
	ADDL $16, R11

	VMOVDQU (AX), Y15
	VPXOR   Y15, Y0, Y0
	VPXOR   Y15, Y1, Y1
	VPXOR   Y15, Y2, Y2
	VPXOR   Y15, Y3, Y3
	VPXOR   Y15, Y4, Y4
	VPXOR   Y15, Y5, Y5
	VPXOR   Y15, Y6, Y6
	VPXOR   Y15, Y7, Y7

	AESRND8(32)
	AESRND8(64)
	AESRND8(96)
	AESRND8(128)
	AESRND8(160)
	AESRND8(192)
	AESRND8(224)
	AESRND8(256)
	AESRND8(288)
	CMPQ R8, $10
	JEQ  last10
	AESRND8(320)
	AESRND8(352)
	AESRND8(384)
	AESRND8(416)
	AESLAST8(448)
	JMP  out16

last10:
	AESLAST8(320)

out16:
	XORSTORE(Y0, 0)
	XORSTORE(Y1, 32)
	XORSTORE(Y2, 64)
	XORSTORE(Y3, 96)
	XORSTORE(Y4, 128)
	XORSTORE(Y5, 160)
	XORSTORE(Y6, 192)
	XORSTORE(Y7, 224)
	ADDQ $256, SI
	ADDQ $256, DI
	SUBQ $16, CX
	JMP  loop16

tail:
	// One or two blocks at a time.
	TESTQ CX, CX
	JZ    done
	NEXTCTR(Y0)
	VPXOR (AX), Y0, Y0
	VAESENC 32(AX), Y0, Y0
	VAESENC 64(AX), Y0, Y0
	VAESENC 96(AX), Y0, Y0
	VAESENC 128(AX), Y0, Y0
	VAESENC 160(AX), Y0, Y0
	VAESENC 192(AX), Y0, Y0
	VAESENC 224(AX), Y0, Y0
	VAESENC 256(AX), Y0, Y0
	VAESENC 288(AX), Y0, Y0
	CMPQ R8, $10
	JEQ  tlast10
	VAESENC 320(AX), Y0, Y0
	VAESENC 352(AX), Y0, Y0
	VAESENC 384(AX), Y0, Y0
	VAESENC 416(AX), Y0, Y0
	VAESENCLAST 448(AX), Y0, Y0
	JMP  tout

tlast10:
	VAESENCLAST 320(AX), Y0, Y0

tout:
	CMPQ CX, $2
	JB   tone
	XORSTORE(Y0, 0)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $2, CX
	JMP  tail

tone:
	VPXOR   (SI), X0, X0
	VMOVDQU X0, (DI)

done:
	CLEARKEYS
	RET

// ---------------------------------------------------------------------------
// GHASH with VPCLMULQDQ.

// REDUCE folds the 256-bit product (lo, hi) modulo the GCM polynomial into
// hi; lo, t are clobbered; poly holds polyC.
#define REDUCE(lo, hi, t, poly) \
	VPCLMULQDQ $0x00, poly, lo, t; \
	VPSHUFD    $0x4e, lo, lo; \
	VPXOR      t, lo, lo; \
	VPCLMULQDQ $0x00, poly, lo, t; \
	VPSHUFD    $0x4e, lo, lo; \
	VPXOR      lo, hi, hi; \
	VPXOR      t, hi, hi

// MUL4 accumulates the four partial products of the two lanes of Y4 by the
// two lanes of the 32-byte operand m into Y1 (low), Y2 (high), Y3 (middle).
#define MUL4(m) \
	VPCLMULQDQ $0x00, m, Y4, Y5; VPXOR Y5, Y1, Y1; \
	VPCLMULQDQ $0x11, m, Y4, Y6; VPXOR Y6, Y2, Y2; \
	VPCLMULQDQ $0x01, m, Y4, Y5; VPXOR Y5, Y3, Y3; \
	VPCLMULQDQ $0x10, m, Y4, Y6; VPXOR Y6, Y3, Y3

// MUL3 is MUL4 with Karatsuba (see SGH): Y3 gets the middle' sums, which
// KARFIX turns into true middle sums before FOLDREDUCE.
#define MUL3(off) \
	VPCLMULQDQ $0x00, off(AX), Y4, Y5; VPXOR Y5, Y1, Y1; \
	VPCLMULQDQ $0x11, off(AX), Y4, Y6; VPXOR Y6, Y2, Y2; \
	VPSHUFD    $0x4e, Y4, Y5; VPXOR Y4, Y5, Y5; \
	VPCLMULQDQ $0x00, 256+off(AX), Y5, Y5; VPXOR Y5, Y3, Y3

#define KARFIX \
	VPXOR Y1, Y3, Y3; VPXOR Y2, Y3, Y3

// FOLDREDUCE sums both lanes of (Y1, Y2, Y3) and reduces into X0 (upper
// lane of Y0 zero).
#define FOLDREDUCE \
	VPSLLDQ      $8, Y3, Y5; VPXOR Y5, Y1, Y1; \
	VPSRLDQ      $8, Y3, Y3; VPXOR Y3, Y2, Y2; \
	VEXTRACTI128 $1, Y1, X5; VPXOR X5, X1, X1; \
	VEXTRACTI128 $1, Y2, X6; VPXOR X6, X2, X2; \
	REDUCE(X1, X2, X5, X13); \
	VMOVDQU      X2, X0

#define LOADBLK(off) \
	VMOVDQU off(SI), Y4; VPSHUFB Y14, Y4, Y4

// func ghashBlocks(htab *byte, state *[16]byte, src *byte, nblocks int)
//
// state = GHASH_H(state, src) over nblocks 16-byte blocks; state is in GCM
// byte order.
TEXT ·ghashBlocks(SB), NOSPLIT, $0-32
	MOVQ htab+0(FP), AX
	MOVQ state+8(FP), BX
	MOVQ src+16(FP), SI
	MOVQ nblocks+24(FP), CX

	VMOVDQU byteRev<>(SB), Y14
	VMOVDQU polyC<>(SB), X13
	VMOVDQU (BX), X0
	VPSHUFB X14, X0, X0

loop16:
	CMPQ CX, $16
	JB   tail

	// First pair: (state ^ block 0) * H^16, block 1 * H^15.
	LOADBLK(0)
	VPXOR      Y0, Y4, Y4
	VPCLMULQDQ $0x00, (AX), Y4, Y1
	VPCLMULQDQ $0x11, (AX), Y4, Y2
	VPSHUFD    $0x4e, Y4, Y5
	VPXOR      Y4, Y5, Y5
	VPCLMULQDQ $0x00, 256(AX), Y5, Y3
	LOADBLK(32)
	MUL3(32)
	LOADBLK(64)
	MUL3(64)
	LOADBLK(96)
	MUL3(96)
	LOADBLK(128)
	MUL3(128)
	LOADBLK(160)
	MUL3(160)
	LOADBLK(192)
	MUL3(192)
	LOADBLK(224)
	MUL3(224)
	KARFIX
	FOLDREDUCE

	ADDQ $256, SI
	SUBQ $16, CX
	JMP  loop16

tail:
	CMPQ CX, $2
	JB   tone
	// Two blocks: (state ^ b0) * H^2 ^ b1 * H.
	LOADBLK(0)
	VPXOR      Y0, Y4, Y4
	VPXOR      Y1, Y1, Y1
	VPXOR      Y2, Y2, Y2
	VPXOR      Y3, Y3, Y3
	MUL4(224(AX))
	FOLDREDUCE
	ADDQ $32, SI
	SUBQ $2, CX
	JMP  tail

tone:
	TESTQ CX, CX
	JZ    done
	VMOVDQU    (SI), X4
	VPSHUFB    X14, X4, X4
	VPXOR      X0, X4, X4
	VPCLMULQDQ $0x00, 240(AX), X4, X1
	VPCLMULQDQ $0x11, 240(AX), X4, X2
	VPCLMULQDQ $0x01, 240(AX), X4, X3
	VPCLMULQDQ $0x10, 240(AX), X4, X5
	VPXOR      X5, X3, X3
	FOLDREDUCE

done:
	VPSHUFB X14, X0, X0
	VMOVDQU X0, (BX)
	VZEROUPPER
	RET

// func ghashInit(htab *byte, h1 *[16]byte)
//
// h1 is R(H x^-1) as a little-endian 128-bit integer; fills htab with
// R(H^k x^-1) at offset (16-k)*16 for k = 1..16, and at offset 256 +
// (16-k)*16 the XOR of its two halves (in both halves) for Karatsuba.
TEXT ·ghashInit(SB), NOSPLIT, $0-16
	MOVQ htab+0(FP), AX
	MOVQ h1+8(FP), BX
	VMOVDQU polyC<>(SB), X13
	VMOVDQU (BX), X7
	VMOVDQU X7, 240(AX)
	VMOVDQU X7, X0
	MOVQ    $224, DX

initloop:
	VPCLMULQDQ $0x00, X7, X0, X1
	VPCLMULQDQ $0x11, X7, X0, X2
	VPCLMULQDQ $0x01, X7, X0, X3
	VPCLMULQDQ $0x10, X7, X0, X5
	VPXOR      X5, X3, X3
	FOLDREDUCE
	VMOVDQU    X0, (AX)(DX*1)
	SUBQ       $16, DX
	JGE        initloop

	// Karatsuba table: lo^hi of each power in both qwords, at +256.
	MOVQ $240, DX

karloop:
	VMOVDQU (AX)(DX*1), X1
	VPSHUFD $0x4e, X1, X2
	VPXOR   X1, X2, X2
	VMOVDQU X2, 256(AX)(DX*1)
	SUBQ    $16, DX
	JGE     karloop

	VPXOR X0, X0, X0
	VPXOR X7, X7, X7
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------
// Stitched CTR + GHASH: each iteration encrypts 16 blocks (src -> dst) and
// hashes 16 blocks at hsrc, interleaving the carry-less multiplications
// with the AES rounds so both execution resources stay busy. Open passes
// hsrc = src (hash the ciphertext being decrypted); Seal passes hsrc =
// dst - 256 (hash the previous iteration's ciphertext).
//
// Registers: Y0-Y7 AES states, Y8 counters [c, c+1] (little-endian dword 3),
// Y9 GHASH state (low lane), Y10/Y11/Y12 low/high/middle product sums,
// Y13 data, Y14 temporary, Y15 round key.

#define SROUND(off) AESRND8(off)

#define SCTR(y) \
	VPSHUFB ctrSwap<>(SB), Y8, y; VPADDD ctrInc22<>(SB), Y8, Y8

// Karatsuba: per lane, low = a0*h0, high = a1*h1 and
// middle' = (a0^a1)*(h0^h1); the true middle term is middle'^low^high,
// recovered once per batch from the sums. htab+256 holds h0^h1 of each
// power (in both qwords), laid out like the powers.
#define SGHFIRST \
	VMOVDQU    (R10), Y13; VPSHUFB byteRev<>(SB), Y13, Y13; VPXOR Y9, Y13, Y13; \
	VPCLMULQDQ $0x00, (DX), Y13, Y10; \
	VPCLMULQDQ $0x11, (DX), Y13, Y11; \
	VPSHUFD    $0x4e, Y13, Y14; VPXOR Y13, Y14, Y14; \
	VPCLMULQDQ $0x00, 256(DX), Y14, Y12

#define SGH(off) \
	VMOVDQU    off(R10), Y13; VPSHUFB byteRev<>(SB), Y13, Y13; \
	VPCLMULQDQ $0x00, off(DX), Y13, Y14; VPXOR Y14, Y10, Y10; \
	VPCLMULQDQ $0x11, off(DX), Y13, Y14; VPXOR Y14, Y11, Y11; \
	VPSHUFD    $0x4e, Y13, Y14; VPXOR Y13, Y14, Y14; \
	VPCLMULQDQ $0x00, 256+off(DX), Y14, Y14; VPXOR Y14, Y12, Y12

#define SGHREDUCE \
	VPXOR        Y10, Y12, Y12; VPXOR Y11, Y12, Y12; \
	VPSLLDQ      $8, Y12, Y14; VPXOR Y14, Y10, Y10; \
	VPSRLDQ      $8, Y12, Y12; VPXOR Y12, Y11, Y11; \
	VEXTRACTI128 $1, Y10, X14; VPXOR X14, X10, X10; \
	VEXTRACTI128 $1, Y11, X14; VPXOR X14, X11, X11; \
	VPCLMULQDQ   $0x00, polyC<>(SB), X10, X14; \
	VPSHUFD      $0x4e, X10, X10; \
	VPXOR        X14, X10, X10; \
	VPCLMULQDQ   $0x00, polyC<>(SB), X10, X14; \
	VPSHUFD      $0x4e, X10, X10; \
	VPXOR        X10, X11, X11; \
	VPXOR        X14, X11, X9

// func gcmStitch(rk *byte, rounds int, ctr *[16]byte, htab *byte, state *[16]byte, dst, src, hsrc *byte, nbatches int)
TEXT ·gcmStitch(SB), NOSPLIT, $0-72
	MOVQ rk+0(FP), AX
	MOVQ rounds+8(FP), R8
	MOVQ ctr+16(FP), BX
	MOVQ htab+24(FP), DX
	MOVQ state+32(FP), R9
	MOVQ dst+40(FP), DI
	MOVQ src+48(FP), SI
	MOVQ hsrc+56(FP), R10
	MOVQ nbatches+64(FP), CX

	VMOVDQU (R9), X9
	VPSHUFB byteRev<>(SB), X9, X9
	VBROADCASTI128 (BX), Y8
	VPSHUFB ctrSwap<>(SB), Y8, Y8
	VPADDD ctrInc01<>(SB), Y8, Y8
	MOVL   12(BX), R11
	BSWAPL R11

	TESTQ CX, CX
	JZ    sdone

sloop:
	MOVL R11, R12
	ANDL $0xff, R12
	CMPL R12, $0xf0
	JA   scarry
	CTRBE16(ctrSwap<>(SB))
	JMP  sctrok

scarry:
	SCTR(Y0)
	SCTR(Y1)
	SCTR(Y2)
	SCTR(Y3)
	SCTR(Y4)
	SCTR(Y5)
	SCTR(Y6)
	SCTR(Y7)

sctrok:
	ADDL $16, R11
	VPXOR (AX), Y0, Y0
	VPXOR (AX), Y1, Y1
	VPXOR (AX), Y2, Y2
	VPXOR (AX), Y3, Y3
	VPXOR (AX), Y4, Y4
	VPXOR (AX), Y5, Y5
	VPXOR (AX), Y6, Y6
	VPXOR (AX), Y7, Y7

	SROUND(32)
	SGHFIRST
	SROUND(64)
	SGH(32)
	SROUND(96)
	SGH(64)
	SROUND(128)
	SGH(96)
	SROUND(160)
	SGH(128)
	SROUND(192)
	SGH(160)
	SROUND(224)
	SGH(192)
	SROUND(256)
	SGH(224)
	SROUND(288)
	SGHREDUCE
	CMPQ R8, $10
	JEQ  slast10
	SROUND(320)
	SROUND(352)
	SROUND(384)
	SROUND(416)
	AESLAST8(448)
	JMP  sout

slast10:
	AESLAST8(320)

sout:
	XORSTORE(Y0, 0)
	XORSTORE(Y1, 32)
	XORSTORE(Y2, 64)
	XORSTORE(Y3, 96)
	XORSTORE(Y4, 128)
	XORSTORE(Y5, 160)
	XORSTORE(Y6, 192)
	XORSTORE(Y7, 224)
	ADDQ $256, SI
	ADDQ $256, DI
	ADDQ $256, R10
	DECQ CX
	JNZ  sloop

sdone:
	VPSHUFB byteRev<>(SB), X9, X9
	VMOVDQU X9, (R9)
	CLEARKEYS
	RET
