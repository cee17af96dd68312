// A phase as a coloured label: green serving, red failed, orange on its way.
import { Label } from "@patternfly/react-core";

const GOOD = new Set(["Ready", "Available", "Delivered", "Complete"]);
const BAD = new Set(["Failed", "Degraded", "Invalid", "RolledBack", "Halted", "Conflict"]);

export function PhaseLabel({ phase }: { phase: string }) {
  const color = GOOD.has(phase) ? "green" : BAD.has(phase) ? "red" : "orange";
  return <Label color={color}>{phase}</Label>;
}
