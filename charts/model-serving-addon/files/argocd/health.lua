-- Argo CD health of a model-serving hub intent (ModelServing, StorageConnection,
-- MultiClusterServingRuntime, MultiClusterInferenceService): all four share the manager's
-- status (phase, conditions, summary, rollout). Argo CD runs it in gopher-lua (Lua 5.1)
-- with the object as `obj`; it returns `hs` with a status and a message.
local hs = {status = "Progressing", message = "waiting for the model-serving manager"}
if obj.status == nil then
  return hs
end
local status = obj.status
local function ready_message()
  if status.conditions ~= nil then
    for _, condition in ipairs(status.conditions) do
      if condition.type == "Ready" and condition.message ~= nil then
        return condition.message
      end
    end
  end
  return ""
end
local generation = obj.metadata.generation
if generation ~= nil and status.observedGeneration ~= generation then
  hs.message = "the manager has not seen generation " .. tostring(generation) .. " yet"
  return hs
end
local rollout = status.rollout
if rollout ~= nil and rollout.phase ~= nil then
  local text = rollout.message or ""
  if rollout.phase == "RolledBack" or rollout.phase == "Halted" then
    hs.status = "Degraded"
    hs.message = "rollout " .. rollout.phase .. ": " .. text
    return hs
  end
  if rollout.phase == "Paused" or rollout.phase == "WaitingForApproval" then
    hs.status = "Suspended"
    hs.message = "rollout " .. rollout.phase .. ": " .. text
    return hs
  end
end
local phase = status.phase or "Pending"
local ready = ""
if status.summary ~= nil and status.summary.readyText ~= nil then
  ready = " (" .. status.summary.readyText .. " clusters ready)"
end
if phase == "Ready" then
  hs.status = "Healthy"
  hs.message = "Ready" .. ready
elseif phase == "Degraded" or phase == "Invalid" then
  hs.status = "Degraded"
  hs.message = phase .. ready .. ": " .. ready_message()
else
  hs.message = phase .. ready .. ": " .. ready_message()
end
return hs
