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

#define AESRND8(off) \
	VAESENC off(AX), Y0, Y0; VAESENC off(AX), Y1, Y1; \
	VAESENC off(AX), Y2, Y2; VAESENC off(AX), Y3, Y3; \
	VAESENC off(AX), Y4, Y4; VAESENC off(AX), Y5, Y5; \
	VAESENC off(AX), Y6, Y6; VAESENC off(AX), Y7, Y7

#define AESLAST8(off) \
	VAESENCLAST off(AX), Y0, Y0; VAESENCLAST off(AX), Y1, Y1; \
	VAESENCLAST off(AX), Y2, Y2; VAESENCLAST off(AX), Y3, Y3; \
	VAESENCLAST off(AX), Y4, Y4; VAESENCLAST off(AX), Y5, Y5; \
	VAESENCLAST off(AX), Y6, Y6; VAESENCLAST off(AX), Y7, Y7

#define NEXTCTR(y) \
	VPSHUFB Y10, Y8, y; VPADDD Y9, Y8, Y8

#define XORSTORE(y, off) \
	VPXOR off(SI), y, y; VMOVDQU y, off(DI)

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

loop16:
	CMPQ CX, $16
	JB   tail

	NEXTCTR(Y0)
	NEXTCTR(Y1)
	NEXTCTR(Y2)
	NEXTCTR(Y3)
	NEXTCTR(Y4)
	NEXTCTR(Y5)
	NEXTCTR(Y6)
	NEXTCTR(Y7)

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
	// Do not leave keystream or round keys in registers.
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VPXOR Y15, Y15, Y15
	VZEROUPPER
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
	VPCLMULQDQ $0x01, (AX), Y4, Y3
	VPCLMULQDQ $0x10, (AX), Y4, Y5
	VPXOR      Y5, Y3, Y3
	LOADBLK(32)
	MUL4(32(AX))
	LOADBLK(64)
	MUL4(64(AX))
	LOADBLK(96)
	MUL4(96(AX))
	LOADBLK(128)
	MUL4(128(AX))
	LOADBLK(160)
	MUL4(160(AX))
	LOADBLK(192)
	MUL4(192(AX))
	LOADBLK(224)
	MUL4(224(AX))
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
// R(H^k x^-1) at offset (16-k)*16 for k = 1..16.
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

	VPXOR X0, X0, X0
	VPXOR X7, X7, X7
	VZEROUPPER
	RET
