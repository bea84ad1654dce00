import { adminKubeconfig } from '../../app/kubeconfig.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';

export async function kubeconfigCommand(ctx: CliContext, name: string, flags: { machine?: string }): Promise<number> {
  process.stdout.write(await adminKubeconfig(ctx, name, flags.machine));
  return EXIT.converged;
}
