// The console's page: PatternFly's page layout around the fleet view.
import "@patternfly/react-core/dist/styles/base.css";
import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import {
  Masthead,
  MastheadBrand,
  MastheadContent,
  MastheadMain,
  Page,
} from "@patternfly/react-core";
import { whoami } from "./api";
import { ClusterView, ClustersView } from "./ClustersView";
import { FleetView } from "./FleetView";
import { IntentView } from "./IntentView";
import { ModelForm } from "./ModelForm";
import { RuntimeForm } from "./RuntimeForm";
import { StackForm } from "./StackForm";
import { StorageForm } from "./StorageForm";

/** The page the address names: an intent's, or the fleet. */
function Route() {
  const query = new URLSearchParams(window.location.search);
  if (window.location.pathname === "/intent") {
    return (
      <IntentView
        kind={query.get("kind") ?? ""}
        namespace={query.get("namespace") ?? ""}
        name={query.get("name") ?? ""}
      />
    );
  }
  if (window.location.pathname === "/clusters") return <ClustersView />;
  if (window.location.pathname === "/cluster") {
    return <ClusterView name={query.get("name") ?? ""} />;
  }
  if (window.location.pathname === "/stack") {
    return <StackForm namespace={query.get("namespace") ?? ""} name={query.get("name") ?? ""} />;
  }
  if (window.location.pathname === "/new-runtime") {
    return <RuntimeForm namespace={query.get("namespace") ?? ""} />;
  }
  if (window.location.pathname === "/new-storage") {
    return <StorageForm namespace={query.get("namespace") ?? ""} />;
  }
  if (window.location.pathname === "/new-model" || window.location.pathname === "/model") {
    return <ModelForm namespace={query.get("namespace") ?? ""} name={query.get("name") ?? ""} />;
  }
  return <FleetView />;
}

function App() {
  const [user, setUser] = useState("");
  useEffect(() => {
    whoami()
      .then((u) => setUser(u.username))
      .catch((err: Error) => setUser(`not signed in: ${err.message}`));
  }, []);
  const masthead = (
    <Masthead>
      <MastheadMain>
        <MastheadBrand>Model serving fleet</MastheadBrand>
      </MastheadMain>
      <MastheadContent>
        <a href="/">Fleet</a>&nbsp;&nbsp;<a href="/clusters">Clusters</a>&nbsp;&nbsp;
        <span data-testid="user">{user}</span>
      </MastheadContent>
    </Masthead>
  );
  return (
    <Page masthead={masthead}>
      <Route />
    </Page>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
