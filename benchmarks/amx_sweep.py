"""bfloat16 on AMX tiles against AVX-512 and PyTorch, on every dense layer of the
seven networks of ``convviz.networks`` (issue 35's AMX point).

For each layer (SAME padding, batch from the command line) and each of the forward
pass, the input gradient and the filter gradient, in one process, paired: convviz
with AMX (``cpu.AMX_ALLOWED``), convviz with AMX switched off (the AVX-512 kernels),
and PyTorch 2.13 on channels_last bfloat16 (oneDNN, which uses AMX where it runs),
each the best of 2-3 rounds after a warm-up, on 2 threads.  Whether convviz's call
ran on the tiles is recorded per op (``ran_amx``).

    OPENBLAS_NUM_THREADS=1 python benchmarks/amx_sweep.py 1 results.json
    OPENBLAS_NUM_THREADS=1 python benchmarks/amx_sweep.py 8 results.json resnet18,mobilenet_v2 bpf

(optional: the networks, comma-separated, and the ops of fwd, bpi, bpf to time).

Writes a JSON list of {"layer", "batch", "flops", op: {"amx", "avx512", "torch",
"ran_amx"}} (seconds).  Needs PyTorch.
"""
import numpy as np, ml_dtypes, time, sys, json, torch, convviz
import convviz.networks as N
from convviz._backends import cpu
from convviz.ops import _forward, _filter_grad
torch.set_num_threads(2)
bf=ml_dtypes.bfloat16
rng=np.random.default_rng(0)
batch=int(sys.argv[1]); out=sys.argv[2]
nets=sys.argv[3].split(",") if len(sys.argv) > 3 and sys.argv[3] else None
only=sys.argv[4].split(",") if len(sys.argv) > 4 else ["fwd","bpi","bpf"]
L=[l for l in N.distinct_layers(nets) if not l.depthwise]
res=[]
def best(f, rounds):
    f(); b=9
    for _ in range(rounds):
        t=time.perf_counter(); f(); b=min(b,time.perf_counter()-t)
    return b
for l in L:
    n,h,ci,co,k,s=batch,l.size,l.c_in,l.c_out,l.k,l.stride
    x=rng.standard_normal((n,h,h,ci)).astype(bf); w=(rng.standard_normal((k,k,ci,co))*0.1).astype(bf)
    st=[1,s,s,1]
    y=convviz.conv2d(x,w,st,"SAME"); dy=rng.standard_normal(y.shape).astype(bf)
    tx=torch.from_numpy(x.astype(np.float32)).permute(0,3,1,2).to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
    tw=torch.from_numpy(w.astype(np.float32)).permute(3,2,0,1).to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
    # SAME padding for torch: pad explicitly like TF
    oh=y.shape[1]; pad=max((oh-1)*s+k-h,0); pt=pad//2; pb=pad-pt
    tdy=torch.from_numpy(dy.astype(np.float32)).permute(0,3,1,2).to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
    txp=torch.nn.functional.pad(tx,(pt,pb,pt,pb)).contiguous(memory_format=torch.channels_last)
    ops={
     "fwd":(lambda: convviz.conv2d(x,w,st,"SAME"), lambda: torch.nn.functional.conv2d(txp,tw,stride=s)),
     "bpi":(lambda: convviz.conv2d_backprop_input(x.shape,w,dy,st,"SAME"), lambda: torch.ops.aten.convolution_backward(tdy,txp,tw,None,[s,s],[0,0],[1,1],False,[0,0],1,[True,False,False])),
     "bpf":(lambda: convviz.conv2d_backprop_filter(x,w.shape,dy,st,"SAME"), lambda: torch.ops.aten.convolution_backward(tdy,txp,tw,None,[s,s],[0,0],[1,1],False,[0,0],1,[False,True,False])),
    }
    flops=2.0*n*oh*oh*co*k*k*ci
    rounds=3 if flops<5e8 else 2
    row={"layer":l.describe(),"batch":n,"flops":flops}
    ops={op:ops[op] for op in only}
    for op,(cv,tt) in ops.items():
        cpu.AMX_ALLOWED=True; cv(); ran=(_filter_grad.last_ran_on_amx() if op=="bpf" else _forward.last_ran_on_amx())
        ta=best(cv,rounds)
        cpu.AMX_ALLOWED=False; tb=best(cv,rounds); cpu.AMX_ALLOWED=True
        tt_=best(tt,rounds)
        ta=min(ta,best(cv,1))
        row[op]={"amx":ta,"avx512":tb,"torch":tt_,"ran_amx":ran}
    res.append(row)
    print(row["layer"], " ".join("%s %s amx %.3f avx %.3f torch %.3f"%(op,"A" if row[op]["ran_amx"] else "-",row[op]["amx"]*1e3,row[op]["avx512"]*1e3,row[op]["torch"]*1e3) for op in ops), flush=True)
json.dump(res,open(out,"w"),indent=1)
