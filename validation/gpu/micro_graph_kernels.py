#!/usr/bin/env python3
# In-graph per-kernel time of small memory-bound kernels on the H200 (2026-12-01): the script
# run (inline, via the device tool) for validation/measurements/h200_micro_graph_kernels.csv; see
# h200_micro_graph_kernels_env.json for the method.  Writes $OUT/h200_micro_graph_kernels.csv.
import torch,os;T=torch.cuda
F=torch.nn.functional;d='cuda';b=torch.bfloat16
print(torch.__version__,torch.version.cuda,T.get_device_name())
def g(fn,R):
 s=T.Stream();s.wait_stream(T.current_stream())
 with T.stream(s):
  for _ in range(3):fn()
 T.current_stream().wait_stream(s);G=T.CUDAGraph()
 with T.graph(G):
  for _ in range(R):fn()
 return G
def t(G,n=25):
 e=[T.Event(enable_timing=True) for _ in range(2)];G.replay();T.synchronize();x=[]
 for _ in range(n):
  T._sleep(100000);e[0].record();G.replay();e[1].record();e[1].synchronize();x.append(e[0].elapsed_time(e[1]))
 x.sort();return x[n//2]
f=open(os.environ['OUT']+'/h200_micro_graph_kernels.csv','w');f.write('op,rows,hidden,bytes,graph1_us,per_kernel_us\n')
z=torch.zeros(1,device=d,dtype=b)
a=t(g(lambda:z.add_(1),1));c=t(g(lambda:z.add_(1),41));f.write(f'tiny_add,1,1,4,{a*1e3:.3f},{(c-a)/40*1e3:.4f}\n')
for rows in [1,8,32,128,512,1024,2048]:
 for h in [4096,8192]:
  x=torch.randn(rows,h,device=d,dtype=b);w=torch.randn(h,device=d,dtype=b);y=torch.empty_like(x);C=torch.empty(rows,2,h,device=d,dtype=b)
  x3=x.view(rows,h//128,128);c3=torch.randn(rows,1,128,device=d,dtype=b);y3=y.view_as(x3);nb=rows*h*2
  cs={'rmsnorm':(lambda:F.rms_norm(x,(h,),w,1e-5),2),'layernorm':(lambda:F.layer_norm(x,(h,),w,w,1e-5),2),'softmax':(lambda:torch.softmax(x,-1),2),'add':(lambda:torch.add(x,x,out=y),3),'silu':(lambda:F.silu(x),2),'copy':(lambda:y.copy_(x),2),'strided_copy':(lambda:C[:,0].copy_(x),2),'bcast_mul':(lambda:torch.mul(x3,c3,out=y3),2),'neg':(lambda:torch.neg(x),2),'cat':(lambda:torch.cat((x,x),-1),4)}
  for k,(fn,m) in cs.items():
   a=t(g(fn,1));c=t(g(fn,21));f.write(f'{k},{rows},{h},{m*nb},{a*1e3:.3f},{(c-a)/20*1e3:.4f}\n')
  print(rows,h,flush=True)
f.close()
